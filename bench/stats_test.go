package bench

import (
	"math"
	"os"
	"strings"
	"testing"
)

func TestPercentileAndMedian(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	for _, tc := range []struct {
		p    float64
		want float64
	}{{50, 5}, {99, 10}, {10, 1}, {0, 1}, {100, 10}} {
		if got := Percentile(xs, tc.p); got != tc.want {
			t.Errorf("Percentile(p%v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := Median(xs); got != 5.5 {
		t.Errorf("Median = %v, want 5.5", got)
	}
	if !math.IsNaN(Median(nil)) || !math.IsNaN(Percentile(nil, 50)) {
		t.Error("empty input must give NaN")
	}
}

func TestSampleFormatAndRatio(t *testing.T) {
	var a, b Sample
	a.Add(1, false)
	a.Add(2, false)
	a.Add(3, false)
	b.Add(300, true)
	for _, tc := range []struct{ got, want string }{
		{a.Format(FmtCPU), "2.00s [1.00s–3.00s]"},
		{b.Format(FmtSeconds), "> 300.00s"},
		{Ratio(a, b), "< 0.0067"}, // two significant digits below 0.01, never 0.00
		{Ratio(sample(0.04), sample(10)), "0.004"},
		{Ratio(sample(1), sample(2)), "0.50"},
		{Ratio(a, Sample{}), "–"},
		{Sample{}.Format(FmtCPU), "–"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestProcFiguresOfSelf(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	if _, err := ProcCPU(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	rss, err := ProcPeakRSS(os.Getpid())
	if err != nil || rss <= 0 {
		t.Fatalf("ProcPeakRSS = %v, %v", rss, err)
	}
}

func TestUpdateReadmeReplacesBetweenMarkers(t *testing.T) {
	path := t.TempDir() + "/README.md"
	if err := os.WriteFile(path, []byte("a\n"+ReadmeBegin+"\nold\n"+ReadmeEnd+"\nb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if ok, err := UpdateReadme(path, "new"); !ok || err != nil {
		t.Fatalf("UpdateReadme = %v, %v", ok, err)
	}
	b, _ := os.ReadFile(path)
	if s := string(b); strings.Contains(s, "old") || !strings.Contains(s, ReadmeBegin+"\nnew\n"+ReadmeEnd) {
		t.Errorf("README after update:\n%s", s)
	}
	if err := os.WriteFile(path, []byte("no markers\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if ok, err := UpdateReadme(path, "new"); ok || err != nil {
		t.Errorf("without markers: UpdateReadme = %v, %v; want false, nil", ok, err)
	}
}

func sample(v float64) Sample {
	var s Sample
	s.Add(v, false)
	return s
}
