package nftables

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/knftables"

	"github.com/kproxy/kproxy/internal/render/rendertest"
	"github.com/kproxy/kproxy/internal/testing/golden"
)

// TestDescribe checks the text the state API shows for a ServicePort with a
// NodePort, affinity and two endpoints.
func TestDescribe(t *testing.T) {
	sp := rendertest.ServicePort("ns1", "svc1", "p80", v1.ProtocolTCP, "172.30.0.41", 80)
	sp.NodePort = 30080
	sp.StickyMaxAgeSeconds = 600
	view := rendertest.View(sp, rendertest.Endpoint("10.180.0.1", 8080, true), rendertest.Endpoint("10.180.1.1", 8080, false))
	f := RenderService(testConfig(knftables.IPv4Family), view)
	golden.Check(t, "describe-nodeport-affinity.txt", strings.Join(f.Describe(), "\n")+"\n")
}
