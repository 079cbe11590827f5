package sysctl

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"
)

// OOMScoreAdjuster sets the OOM score adjustment of the running process.
type OOMScoreAdjuster interface {
	SetOOMScoreAdj(value int) error
}

// SelfOOMScoreAdj implements OOMScoreAdjuster with /proc/self/oom_score_adj.
type SelfOOMScoreAdj struct {
	// Path defaults to "/proc/self/oom_score_adj".
	Path string
}

var _ OOMScoreAdjuster = SelfOOMScoreAdj{}

// SetOOMScoreAdj writes the value, which the kernel bounds to [-1000, 1000].
func (s SelfOOMScoreAdj) SetOOMScoreAdj(value int) error {
	if value < -1000 || value > 1000 {
		return fmt.Errorf("invalid oom_score_adj %d: must be within [-1000, 1000]", value)
	}
	path := s.Path
	if path == "" {
		path = "/proc/self/oom_score_adj"
	}
	return writeIntFile(path, value)
}

// ApplyOOMScoreAdj sets the adjustment and only logs on failure: lowering the score
// needs CAP_SYS_RESOURCE, which many containers lack, and kube-proxy carries on
// without it.
func ApplyOOMScoreAdj(ctx context.Context, adj OOMScoreAdjuster, value int) {
	logger := klog.FromContext(ctx)
	if err := adj.SetOOMScoreAdj(value); err != nil {
		logger.Info("Warning: failed to apply OOMScore", "oomScoreAdj", value, "err", err)
		return
	}
	logger.V(2).Info("Applied OOMScore", "oomScoreAdj", value)
}
