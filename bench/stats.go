package bench

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"
)

// Percentile returns the p-th percentile (0..100, nearest rank) of xs, or NaN.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	rank := int(math.Ceil(p/100*float64(len(s)))) - 1
	rank = max(0, min(rank, len(s)-1))
	return s[rank]
}

// Median is the 50th percentile (the mean of the middle two for even counts).
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// MinMax returns the smallest and largest of xs.
func MinMax(xs []float64) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, x := range xs {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	return lo, hi
}

// Seconds converts durations to float seconds.
func Seconds(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = d.Seconds()
	}
	return out
}

// Sample is a set of repeated observations of one figure; Capped marks observations
// that hit the bound (the value is then the bound, a lower limit).
type Sample struct {
	Values []float64
	Capped int
}

// Add records one observation.
func (s *Sample) Add(v float64, capped bool) {
	s.Values = append(s.Values, v)
	if capped {
		s.Capped++
	}
}

// Format renders the median, with the range when there are several observations, using
// unit to format each number.
func (s Sample) Format(unit func(float64) string) string {
	if len(s.Values) == 0 {
		return "–"
	}
	med := Median(s.Values)
	prefix := ""
	if s.Capped*2 >= len(s.Values) && s.Capped > 0 {
		prefix = "> "
	}
	out := prefix + unit(med)
	if len(s.Values) > 1 {
		lo, hi := MinMax(s.Values)
		out += fmt.Sprintf(" [%s–%s]", unit(lo), unit(hi))
	}
	if s.Capped > 0 && prefix == "" {
		out += fmt.Sprintf(" (%d capped)", s.Capped)
	}
	return out
}

// Units for Sample.Format.
func FmtSeconds(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case v < 1e-3:
		return fmt.Sprintf("%.0fµs", v*1e6)
	case v < 1:
		return fmt.Sprintf("%.1fms", v*1e3)
	}
	return fmt.Sprintf("%.2fs", v)
}

func FmtCPU(v float64) string { return fmt.Sprintf("%.2fs", v) }

func FmtMiB(v float64) string { return fmt.Sprintf("%.0f MiB", v) }

func FmtRate(v float64) string { return fmt.Sprintf("%.0f/s", v) }

// Ratio formats a/b, or "–" when either is missing.
func Ratio(a, b Sample) string {
	if len(a.Values) == 0 || len(b.Values) == 0 {
		return "–"
	}
	ma, mb := Median(a.Values), Median(b.Values)
	if mb == 0 || math.IsNaN(ma) || math.IsNaN(mb) {
		return "–"
	}
	r := fmtRatio(ma / mb)
	if b.Capped*2 >= len(b.Values) && b.Capped > 0 {
		r = "< " + r
	}
	return r
}

// fmtRatio prints a ratio with two decimals, or with two significant digits below
// 0.01 (change latencies are a hundredth of upstream's and less), so that no
// measured ratio prints as 0.00.
func fmtRatio(v float64) string {
	if v > 0 && v < 0.01 {
		return strconv.FormatFloat(v, 'g', 2, 64)
	}
	return fmt.Sprintf("%.2f", v)
}
