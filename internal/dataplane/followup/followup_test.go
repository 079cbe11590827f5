package followup

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kproxy/kproxy/internal/model"
)

// The proxiers' tests (internal/dataplane/nftables and iptables) cover Work through
// real syncs; these pin the contract that both rely on.

type recordingHealth struct {
	services []map[types.NamespacedName]uint16
	err      error
	updated  int
}

func (r *recordingHealth) SyncServices(m map[types.NamespacedName]uint16) error {
	r.services = append(r.services, m)
	return r.err
}

func (r *recordingHealth) SyncEndpoints(map[types.NamespacedName]int) error { return nil }

func (r *recordingHealth) Updated(v1.IPFamily) { r.updated++ }

func lbService(healthCheckNodePort int32) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lb"},
		Spec: v1.ServiceSpec{
			Type: v1.ServiceTypeLoadBalancer, ClusterIP: "172.30.0.1", ClusterIPs: []string{"172.30.0.1"},
			IPFamilies:            []v1.IPFamily{v1.IPv4Protocol},
			Ports:                 []v1.ServicePort{{Port: 80, Protocol: v1.ProtocolTCP, NodePort: 30080, TargetPort: intstr.FromInt32(80)}},
			ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyLocal,
			HealthCheckNodePort:   healthCheckNodePort,
		},
	}
}

// TestFailedWorkWaitsForSuccess: a health check node port change of a failed sync is
// passed on by the next successful one, and only once.
func TestFailedWorkWaitsForSuccess(t *testing.T) {
	state := model.NewState(v1.IPv4Protocol, "node-a")
	h := &recordingHealth{}
	w := New(Config{Family: v1.IPv4Protocol, State: state, ServiceHealth: h, Health: h,
		Clock: clocktesting.NewFakeClock(time.Unix(0, 0))})
	ctx := context.Background()

	w.Succeeded(ctx, state.Commit(), time.Unix(0, 0), true)
	if len(h.services) != 1 || h.updated != 1 {
		t.Fatalf("first success: %d SyncServices, %d Updated; want 1 and 1", len(h.services), h.updated)
	}
	state.OnServiceAdd(lbService(30999))
	w.Failed(state.Commit())
	w.Succeeded(ctx, state.Commit(), time.Unix(0, 0), false)
	if len(h.services) != 2 || h.services[1][types.NamespacedName{Namespace: "ns", Name: "lb"}] != 30999 {
		t.Errorf("after the failure and a success: SyncServices calls %v", h.services)
	}
	w.Succeeded(ctx, state.Commit(), time.Unix(0, 0), false)
	if len(h.services) != 2 {
		t.Errorf("SyncServices called again without a change")
	}

	// A health server failure is retried at the next success.
	state.OnServiceUpdate(nil, lbService(30998))
	h.err = errors.New("port in use")
	w.Succeeded(ctx, state.Commit(), time.Unix(0, 0), false)
	h.err = nil
	w.Succeeded(ctx, state.Commit(), time.Unix(0, 0), false)
	if n := len(h.services); n != 4 {
		t.Errorf("SyncServices called %d times, want a retry (4)", n)
	}
}

func TestReportProblems(t *testing.T) {
	recorder := events.NewFakeRecorder(10)
	w := New(Config{Family: v1.IPv6Protocol, Recorder: recorder})
	w.ReportProblems(klog.Background(), []*model.DataError{
		{Kind: "Service", Object: types.NamespacedName{Namespace: "ns", Name: "a"}, Field: "spec.externalIPs[0]", Value: "x", Reason: "not an IP"},
		{Kind: "EndpointSlice", Object: types.NamespacedName{Namespace: "ns", Name: "b"}, Field: "endpoints[0]", Reason: "bad"},
	})
	for _, want := range []string{"spec.externalIPs[0]", "endpoints[0]"} {
		select {
		case e := <-recorder.Events:
			if !strings.HasPrefix(e, "Warning InvalidData") || !strings.Contains(e, want) || !strings.Contains(e, "IPv6") {
				t.Errorf("event %q, want a Warning InvalidData about %s in IPv6", e, want)
			}
		default:
			t.Fatalf("no event about %s", want)
		}
	}
	// Without a recorder the problems are only logged.
	New(Config{Family: v1.IPv4Protocol}).ReportProblems(klog.Background(), []*model.DataError{{Kind: "Service"}})
}

// TestTakeProgramming: the network programming latencies of successful syncs are
// summed up until taken, then start again from zero.
func TestTakeProgramming(t *testing.T) {
	now := time.Unix(1000, 0)
	w := New(Config{Family: v1.IPv4Protocol, State: model.NewState(v1.IPv4Protocol, "node-a"), Clock: clocktesting.NewFakeClock(now)})
	ctx := context.Background()
	w.Succeeded(ctx, &model.Update{LastChangeTriggerTimes: map[types.NamespacedName][]time.Time{
		{Namespace: "ns", Name: "a"}: {now.Add(-3 * time.Second), now.Add(-time.Second)},
	}}, now, false)
	w.Succeeded(ctx, &model.Update{LastChangeTriggerTimes: map[types.NamespacedName][]time.Time{
		{Namespace: "ns", Name: "b"}: {now.Add(-2 * time.Second)},
	}}, now, false)
	want := Programming{Count: 3, Sum: 6 * time.Second, Max: 3 * time.Second}
	if got := w.TakeProgramming(); got != want {
		t.Errorf("TakeProgramming = %+v, want %+v", got, want)
	}
	if got := w.TakeProgramming(); got != (Programming{}) {
		t.Errorf("a second TakeProgramming = %+v, want nothing", got)
	}
}
