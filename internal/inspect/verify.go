package inspect

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"text/tabwriter"
	"time"

	"github.com/kproxy/kproxy/internal/drift"
)

// Verification is the document of GET verify: a comparison, made when asked, of
// what each family's kernel objects hold with what the proxy last applied.
type Verification struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Families   []FamilyReport `json:"families"`
}

// FamilyReport is one family's comparison, or why there is none.
type FamilyReport struct {
	drift.Report
	// Error, when set, says why the family could not be compared.
	Error string `json:"error,omitempty"`
}

// Differences counts the differences of every family.
func (v *Verification) Differences() int {
	n := 0
	for _, f := range v.Families {
		n += f.Count
	}
	return n
}

// BuildVerification compares every family that can (Family.Verify); it waits for
// each family's sync in progress.
func BuildVerification(ctx context.Context, families []Family) *Verification {
	v := &Verification{APIVersion: APIVersion, Kind: "Verification", Families: []FamilyReport{}}
	for i := range families {
		f := &families[i]
		fr := FamilyReport{Report: drift.Report{Family: string(f.State.Family())}}
		switch {
		case f.Verify == nil:
			fr.Error = "this proxy mode cannot compare the kernel with what it applied"
		default:
			r, err := f.Verify(ctx)
			if err != nil {
				fr.Error = err.Error()
			} else {
				fr.Report = *r
			}
		}
		v.Families = append(v.Families, fr)
	}
	return v
}

func verifyHandler(src *Source) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, BuildVerification(r.Context(), src.Families))
	}
}

// PrintVerification writes v as text: per family, the count and every difference
// listed.
func PrintVerification(w io.Writer, v *Verification) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, f := range v.Families {
		switch {
		case f.Error != "":
			fmt.Fprintf(tw, "%s:\tnot compared: %s\n", f.Family, f.Error)
			continue
		case f.Count == 0:
			fmt.Fprintf(tw, "%s:\tthe kernel holds what was applied (compared in %s)\n", f.Family, seconds(f.Duration))
			continue
		}
		fmt.Fprintf(tw, "%s:\t%s (compared in %s)\n", f.Family, CountDifferences(f.Count), seconds(f.Duration))
		fmt.Fprintf(tw, "  CHANGE\tKIND\tNAME\tDETAIL\n")
		for _, d := range f.Differences {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", d.Change, d.Kind, orDash(d.Name), orDash(d.Detail))
		}
		if n := f.Count - len(f.Differences); n > 0 {
			fmt.Fprintf(tw, "  ... and %d more\n", n)
		}
	}
	return tw.Flush()
}

// CountDifferences is "1 difference" or "N differences".
func CountDifferences(n int) string {
	if n == 1 {
		return "1 difference"
	}
	return fmt.Sprintf("%d differences", n)
}

func seconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
