package model

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// SliceMeta is the metadata an EndpointSlice keeps: what the informer, its keys
// and its resource versions, and the model's reports read. A converted slice is
// the informer cache's object, one per EndpointSlice, and metav1.ObjectMeta is 232
// bytes of which the watcher keeps 104 (the rest it clears: labels, annotations,
// owner references, finalizers, managed fields; see watch.Trimmer).
//
// It implements metav1.Object: the fields it lacks read as empty, and setting
// them does nothing (cached objects are read-only for every consumer).
type SliceMeta struct {
	Name              string
	Namespace         string
	UID               types.UID
	ResourceVersion   string
	Generation        int64
	CreationTimestamp metav1.Time
	DeletionTimestamp *metav1.Time
}

var _ metav1.Object = &SliceMeta{}

// sliceMeta is the part of m a SliceMeta keeps.
func sliceMeta(m *metav1.ObjectMeta) SliceMeta {
	return SliceMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Generation: m.Generation, CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp}
}

// deepCopy returns m with its own DeletionTimestamp.
func (m SliceMeta) deepCopy() SliceMeta {
	if m.DeletionTimestamp != nil {
		t := *m.DeletionTimestamp
		m.DeletionTimestamp = &t
	}
	return m
}

func (m *SliceMeta) GetNamespace() string                  { return m.Namespace }
func (m *SliceMeta) SetNamespace(namespace string)         { m.Namespace = namespace }
func (m *SliceMeta) GetName() string                       { return m.Name }
func (m *SliceMeta) SetName(name string)                   { m.Name = name }
func (m *SliceMeta) GetGenerateName() string               { return "" }
func (m *SliceMeta) SetGenerateName(string)                {}
func (m *SliceMeta) GetUID() types.UID                     { return m.UID }
func (m *SliceMeta) SetUID(uid types.UID)                  { m.UID = uid }
func (m *SliceMeta) GetResourceVersion() string            { return m.ResourceVersion }
func (m *SliceMeta) SetResourceVersion(version string)     { m.ResourceVersion = version }
func (m *SliceMeta) GetGeneration() int64                  { return m.Generation }
func (m *SliceMeta) SetGeneration(generation int64)        { m.Generation = generation }
func (m *SliceMeta) GetSelfLink() string                   { return "" }
func (m *SliceMeta) SetSelfLink(string)                    {}
func (m *SliceMeta) GetCreationTimestamp() metav1.Time     { return m.CreationTimestamp }
func (m *SliceMeta) SetCreationTimestamp(t metav1.Time)    { m.CreationTimestamp = t }
func (m *SliceMeta) GetDeletionTimestamp() *metav1.Time    { return m.DeletionTimestamp }
func (m *SliceMeta) SetDeletionTimestamp(t *metav1.Time)   { m.DeletionTimestamp = t }
func (m *SliceMeta) GetDeletionGracePeriodSeconds() *int64 { return nil }
func (m *SliceMeta) SetDeletionGracePeriodSeconds(*int64)  {}
func (m *SliceMeta) GetLabels() map[string]string          { return nil }
func (m *SliceMeta) SetLabels(map[string]string)           {}
func (m *SliceMeta) GetAnnotations() map[string]string     { return nil }
func (m *SliceMeta) SetAnnotations(map[string]string)      {}
func (m *SliceMeta) GetFinalizers() []string               { return nil }
func (m *SliceMeta) SetFinalizers([]string)                {}
func (m *SliceMeta) GetOwnerReferences() []metav1.OwnerReference {
	return nil
}
func (m *SliceMeta) SetOwnerReferences([]metav1.OwnerReference) {}
func (m *SliceMeta) GetManagedFields() []metav1.ManagedFieldsEntry {
	return nil
}
func (m *SliceMeta) SetManagedFields([]metav1.ManagedFieldsEntry) {}
