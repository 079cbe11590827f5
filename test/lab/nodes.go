package lab

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeObject is the Node a kubelet would register for np: InternalIP per family,
// hostname, pod CIDRs, zone/region labels, Ready.
func NodeObject(np NodePlan) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: np.Name,
			Labels: map[string]string{
				v1.LabelHostname:       np.Name,
				v1.LabelOSStable:       "linux",
				v1.LabelTopologyZone:   np.Zone,
				v1.LabelTopologyRegion: Region,
			},
		},
		Spec: v1.NodeSpec{
			PodCIDR:  np.PodCIDRs.V4.String(),
			PodCIDRs: []string{np.PodCIDRs.V4.String(), np.PodCIDRs.V6.String()},
		},
		Status: v1.NodeStatus{
			Addresses: []v1.NodeAddress{
				{Type: v1.NodeInternalIP, Address: np.IPs.V4.String()},
				{Type: v1.NodeInternalIP, Address: np.IPs.V6.String()},
				{Type: v1.NodeHostName, Address: np.Name},
			},
			Conditions: []v1.NodeCondition{{
				Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "LabNode",
				LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
			}},
		},
	}
}
