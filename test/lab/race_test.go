package lab

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRaceReports(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) *Process {
		path := filepath.Join(dir, name+".log")
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return &Process{Name: name, LogPath: path}
	}
	clean := write("clean", "I1206 synced\n")
	racy := write("racy", "==================\nWARNING: DATA RACE\nWrite at 0x00c000 by goroutine 7:\n==================\nWARNING: DATA RACE\n")
	gone := &Process{Name: "gone", LogPath: filepath.Join(dir, "missing.log")}
	if err := raceReports([]*Process{clean, gone}); err != nil {
		t.Errorf("raceReports without a report = %v, want nil", err)
	}
	err := raceReports([]*Process{clean, racy})
	if err == nil || !strings.Contains(err.Error(), "racy: 2") || strings.Contains(err.Error(), "clean") {
		t.Errorf("raceReports = %v, want the racy process named with its 2 reports, and only it", err)
	}
}
