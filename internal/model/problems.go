package model

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// DataError describes API data that the model skipped (where upstream kube-proxy logs
// and skips). The caller logs it and may emit an Event on the named object.
type DataError struct {
	// Kind is "Service" or "EndpointSlice".
	Kind string
	// Object is the object's namespace and name.
	Object types.NamespacedName
	// Family is the IP family of the State that noticed the problem ("" when found
	// outside a State). Dual-stack callers see family-independent problems twice.
	Family v1.IPFamily
	// Field is the offending field path, e.g. "spec.externalIPs[1]".
	Field string
	// Value is the offending value, if any.
	Value string
	// Reason says what is wrong and what was done about it.
	Reason string
}

func (e *DataError) Error() string {
	if e.Value != "" {
		return fmt.Sprintf("%s %s: %s %q: %s", e.Kind, e.Object, e.Field, e.Value, e.Reason)
	}
	return fmt.Sprintf("%s %s: %s: %s", e.Kind, e.Object, e.Field, e.Reason)
}

// objectError is a problem of obj, a kind object.
func objectError(kind string, obj metav1.Object, field, value, reason string) *DataError {
	return &DataError{
		Kind:   kind,
		Object: types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()},
		Field:  field,
		Value:  value,
		Reason: reason,
	}
}

func serviceError(svc *v1.Service, field, value, reason string) *DataError {
	return objectError("Service", svc, field, value, reason)
}
