package trace

import (
	"strings"
	"testing"
)

func TestResultCheck(t *testing.T) {
	for _, tc := range []struct {
		r    Result
		want string
	}{
		{Result{}, "without outcomes"},
		{Result{Outcomes: []Outcome{{Probability: 0.5}, {Probability: 0.25}}}, "add up to 0.75"},
		{Result{Outcomes: []Outcome{{Probability: 1.0 / 3}, {Probability: 1.0 / 3}, {Probability: 1.0 / 3}}}, ""},
	} {
		err := tc.r.Check()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v.Check() = %v, want %q", tc.r, err, tc.want)
		}
	}
}
