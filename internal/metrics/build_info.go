package metrics

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// BuildInfo labels kubernetes_build_info; the fields are those of component-base's
// version.Info, which upstream's metric reports.
type BuildInfo struct {
	Major, Minor, GitVersion, GitCommit, GitTreeState, BuildDate, GoVersion, Compiler, Platform string
}

// unknownBuildDate is component-base's default build date, which upstream reports
// unless the build sets one.
const unknownBuildDate = "1970-01-01T00:00:00Z"

// CurrentBuildInfo describes this binary. gitVersion is kproxy's version (as
// --version prints it); Major and Minor are parsed from it ("v1.37.2-kproxy" gives 1
// and 37). The commit and tree state ("clean" or "dirty") come from the Go
// toolchain's VCS stamp when the binary has one, the build date is component-base's
// default (the toolchain records none), and the Go version, compiler and platform
// are the running binary's.
func CurrentBuildInfo(gitVersion string) BuildInfo {
	info := BuildInfo{
		GitVersion: gitVersion,
		BuildDate:  unknownBuildDate,
		GoVersion:  runtime.Version(),
		Compiler:   runtime.Compiler,
		Platform:   fmt.Sprintf("%s/%s", runtime.GOOS, runtime.GOARCH),
	}
	info.Major, info.Minor = majorMinor(gitVersion)
	if bi, ok := debug.ReadBuildInfo(); ok {
		info.GitCommit, info.GitTreeState = vcsStamp(bi.Settings)
	}
	return info
}

// majorMinor parses "v1.37.2-x" into "1" and "37"; anything else gives "" and "".
func majorMinor(v string) (major, minor string) {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 || !digits(parts[0]) || !digits(parts[1]) {
		return "", ""
	}
	return parts[0], parts[1]
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// vcsStamp reads the commit and tree state from the toolchain's build settings.
func vcsStamp(settings []debug.BuildSetting) (commit, treeState string) {
	modified := ""
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if commit == "" {
		return "", ""
	}
	switch modified {
	case "true":
		treeState = "dirty"
	case "false":
		treeState = "clean"
	}
	return commit, treeState
}

// newBuildInfoGauge is kubernetes_build_info with its one series set to 1, as
// component-base/metrics/prometheus/version defines it. That package reports
// component-base's own version variables, which only the Kubernetes build sets, so
// kproxy defines the same family with its own version.
func newBuildInfoGauge(info BuildInfo) prometheus.Collector {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kubernetes_build_info",
		Help: "[BETA] A metric with a constant '1' value labeled by major, minor, git version, git commit, git tree state, build date, Go version, and compiler from which Kubernetes was built, and platform on which it is running.",
	}, []string{"major", "minor", "git_version", "git_commit", "git_tree_state", "build_date", "go_version", "compiler", "platform"})
	g.WithLabelValues(info.Major, info.Minor, info.GitVersion, info.GitCommit, info.GitTreeState,
		info.BuildDate, info.GoVersion, info.Compiler, info.Platform).Set(1)
	return g
}
