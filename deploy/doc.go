// Package deploy holds kproxy's deployment manifests (the YAML files here, which
// `kubectl apply -f deploy/` applies): kubeadm v1.37.2's kube-proxy addon with
// kproxy's image. Its test decodes them and checks the fields kubeadm's addon and
// kproxy depend on.
package deploy
