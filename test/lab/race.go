package lab

import (
	"bytes"
	"fmt"
	"os"
)

// raceMarker opens every report of the Go race detector.
var raceMarker = []byte("WARNING: DATA RACE")

// raceReports returns an error naming the processes whose logs hold race detector
// reports: a daemon built with -race (hack/build.sh --race) reports a race on its
// standard error and carries on, so a test that only looks at its traffic would
// pass. Close checks every process's log with it, once the processes stopped.
func raceReports(procs []*Process) error {
	var found []string
	for _, p := range procs {
		log, err := os.ReadFile(p.LogPath)
		if err != nil {
			continue // a process whose log is gone reported nothing we can show
		}
		if n := bytes.Count(log, raceMarker); n > 0 {
			found = append(found, fmt.Sprintf("%s: %d (%s)", p.Name, n, p.LogPath))
		}
	}
	if len(found) == 0 {
		return nil
	}
	return fmt.Errorf("the race detector reported data races: %v", found)
}
