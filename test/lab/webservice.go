package lab

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// CreateWebService creates a dual-stack TCP Service of type typ named name, port
// "http" 80 to the pods' 8080, with every pod of the lab as its endpoints: the
// Service the demo and the differential suite show a proxy programming.
func (l *Lab) CreateWebService(ctx context.Context, name string, typ v1.ServiceType) (*v1.Service, error) {
	svc, err := l.CreateService(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.ServiceSpec{
			Type:           typ,
			IPFamilyPolicy: ptr.To(v1.IPFamilyPolicyRequireDualStack),
			Ports:          []v1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: v1.ProtocolTCP}},
		},
	})
	if err != nil {
		return nil, err
	}
	if _, err := l.SetEndpoints(ctx, svc, PodEndpoints(l.Pods...), nil); err != nil {
		return nil, fmt.Errorf("endpoints of Service %s: %w", name, err)
	}
	return svc, nil
}
