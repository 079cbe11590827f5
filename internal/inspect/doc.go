// Package inspect is kproxy's state API: what the daemon knows, per IP family,
// served as versioned JSON on the metrics address (upstream's debug handlers live
// there too) and read by `kube-proxy explain`.
//
//   - GET /kproxy/v1alpha1/node: the node-level facts (mode, families, zone, local
//     traffic detector, NodePort addresses, ServiceCIDRs, the last syncs).
//   - GET /kproxy/v1alpha1/services[?namespace=NS][&limit=N][&continue=TOKEN]: the
//     Services the proxy programs, a page at a time (limit defaults to 500 and is at
//     most 5000), in namespace/name order; continue is the last name of the
//     previous page.
//   - GET /kproxy/v1alpha1/services/NS/NAME[?port=P]: one Service: per family and
//     port, its addresses, how each kind of traffic is handled, every endpoint with
//     the reason it is or is not used for each traffic source
//     (model.ExplainEndpoints), and the kernel objects that implement it.
//   - GET /kproxy/v1alpha1/lookup?ip=A&port=P[&protocol=tcp|udp|sctp]: what a
//     destination is: the ServicePorts it reaches as a ClusterIP, externalIP,
//     load-balancer IP or NodePort (on the NodePort addresses of the last sync),
//     each explained as above, and the ServiceCIDR holding it; one walk over the
//     model per request (kube-proxy trace).
//
// The Trace document (BuildTrace, PrintTrace) is not served: `kube-proxy trace`
// builds it from an evaluation of the kernel's live ruleset and a lookup.
//
// SearchServices (search.go) is the status page's Service table
// (internal/statuspage): a page of the Services whose "namespace/name" contains a
// query, with the counts; like BuildServiceList, it explains only the page.
//
// Contract: nothing is kept for the API. A request reads the committed model under
// model.State.Inspect (which holds the sync loop's Commit off for the length of the
// read), renders the kernel objects of the ports it shows again with the settings
// of the proxier's last write (proxycore.Published), and encodes what it found. The
// build functions (build.go) are pure; the handler does the HTTP. Responses are
// bounded: a page of Services, or one Service.
//
// The kernel objects are the desired ones, rendered from the committed model; what
// the kernel actually holds is `kube-proxy trace`'s and `kube-proxy verify`'s
// business.
package inspect
