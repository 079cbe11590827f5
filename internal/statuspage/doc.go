// Package statuspage is kproxy's status page for humans, served on the metrics
// address next to the state API (internal/inspect) and reading the same data:
//
//   - GET /kproxy/: the node page: the node's summary (name, mode, families, zone,
//     local traffic detector, NodePort addresses, ServiceCIDRs), each family's last
//     syncs, charts of the last hour's sync durations and network programming
//     latencies (inline SVG drawn here, from the proxiers' fixed buckets,
//     proxycore.Series), the failed syncs the proxiers kept (proxycore.Failures),
//     and a table of Services filtered by ?q=SUBSTRING of "namespace/name" and paged
//     by ?continue=TOKEN, PageSize at a time, each linking to its page.
//   - GET /kproxy/services/NS/NAME: one Service explained (inspect.BuildService, what
//     `kube-proxy explain service` prints): its ports, how each kind of traffic is
//     handled, every endpoint with the reason it is or is not used, and the kernel
//     objects.
//
// Contract: pages are plain HTML with an inline style sheet: no script, font or
// image is loaded, so they work offline and without JavaScript. Nothing is kept for
// them: a request reads the model and the proxiers as the state API does, and a
// page is bounded whatever the number of Services (one page of the table, one
// Service). The package is pure apart from writing the response: BuildNodePage
// reads, RenderNode, RenderService and Chart.SVG write, Handler does the HTTP. It
// does not log.
package statuspage
