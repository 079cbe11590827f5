package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// setupPodNetwork waits for each worker's Node and its podCIDRs (allocated by the
// controller manager), writes the node's CNI configuration (ptp with host-local IPAM
// on those CIDRs), routes the CIDRs between members, and waits until every Node is
// Ready (the kubelet reports NetworkReady once the configuration is there).
func (c *Cluster) setupPodNetwork(ctx context.Context) error {
	for _, w := range c.Workers {
		if err := c.waitProcess(ctx, w.kubelet, "Node "+w.Name+" with podCIDRs in both families", func(ctx context.Context) error {
			n, err := c.Clientset.CoreV1().Nodes().Get(ctx, w.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if len(n.Spec.PodCIDRs) != 2 {
				return fmt.Errorf("podCIDRs %v", n.Spec.PodCIDRs)
			}
			w.PodCIDRs = nil
			for _, s := range n.Spec.PodCIDRs {
				p, err := netip.ParsePrefix(s)
				if err != nil {
					return err
				}
				w.PodCIDRs = append(w.PodCIDRs, p)
			}
			return nil
		}); err != nil {
			return err
		}
		conf, err := cniConfig(w.PodCIDRs)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(w.path("cni/net.d"), "10-kproxy-cluster.conflist"), conf, 0o644); err != nil {
			return err
		}
	}
	if err := c.installPodRoutes(ctx); err != nil {
		return err
	}
	for _, w := range c.Workers {
		if err := c.waitProcess(ctx, w.kubelet, "Node "+w.Name+" Ready", func(ctx context.Context) error {
			n, err := c.Clientset.CoreV1().Nodes().Get(ctx, w.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady {
					if cond.Status == corev1.ConditionTrue {
						return nil
					}
					return fmt.Errorf("condition Ready=%s: %s", cond.Status, cond.Message)
				}
			}
			return errors.New("no Ready condition yet")
		}); err != nil {
			return err
		}
	}
	return nil
}

// cniConfig is a node's CNI network: ptp (a veth per pod, routed through the node's
// namespace, so no bridge netfilter is involved) with host-local addresses from the
// node's podCIDRs, loopback, and portmap for hostPort pods.
func cniConfig(podCIDRs []netip.Prefix) ([]byte, error) {
	var ranges [][]map[string]string
	var routes []map[string]string
	for _, p := range podCIDRs {
		ranges = append(ranges, []map[string]string{{"subnet": p.String()}})
		if p.Addr().Is4() {
			routes = append(routes, map[string]string{"dst": "0.0.0.0/0"})
		} else {
			routes = append(routes, map[string]string{"dst": "::/0"})
		}
	}
	conf := map[string]any{
		"cniVersion": "0.4.0",
		"name":       "kproxy-cluster",
		"plugins": []any{
			map[string]any{
				"type":   "ptp",
				"ipMasq": false,
				"mtu":    1500,
				"ipam": map[string]any{
					"type":    "host-local",
					"dataDir": cniDataDir,
					"ranges":  ranges,
					"routes":  routes,
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}
