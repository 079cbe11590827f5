package iptables

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestChainsInSave(t *testing.T) {
	save := "# Generated\n*nat\n:PREROUTING ACCEPT [0:0]\n:KUBE-SVC-X - [0:0]\n-A KUBE-SVC-X -j KUBE-SEP-Y\n:\nCOMMIT\n"
	if diff := cmp.Diff([]Chain{"PREROUTING", "KUBE-SVC-X"}, ChainsInSave([]byte(save))); diff != "" {
		t.Error(diff)
	}
}
