package statuspage

// The pages' templates: one layout with the inline style sheet, then the node page
// and the Service page. Nothing is loaded from elsewhere (no script, font or
// image), so a page works offline and without JavaScript.

const layoutTemplate = `{{define "head"}}<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.}}</title>
<style>
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1c2430;background:#f6f7f9}
header{background:#1f3b57;color:#fff;padding:10px 20px}
header h1{font-size:18px;margin:0}
header a{color:#cfe3f7}
main{padding:10px 20px 40px;max-width:1200px}
h2{font-size:16px;margin:24px 0 8px;border-bottom:1px solid #d5dae1;padding-bottom:4px}
h3{font-size:14px;margin:16px 0 6px}
table{border-collapse:collapse;background:#fff;margin:4px 0 8px}
th,td{border:1px solid #d5dae1;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#eef1f5;font-weight:600}
table.facts th{width:220px}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.err,.Reject,.Drop{color:#a61b1b}
.ok,.Used,.Forward{color:#17672e}
.muted{color:#5c6675}
pre{background:#fff;border:1px solid #d5dae1;padding:8px;overflow-x:auto;font-size:12px}
form{margin:8px 0}
input[type=search]{width:320px;padding:3px 6px}
.charts{display:flex;flex-wrap:wrap;gap:16px}
.charts figure{margin:0;background:#fff;border:1px solid #d5dae1;padding:6px;flex:1 1 520px;max-width:760px}
.charts figcaption{font-weight:600;margin-bottom:4px}
svg.chart{width:100%;height:auto;display:block}
svg .grid{stroke:#e3e7ec;stroke-width:1}
svg .axisline,svg .tick{stroke:#8a94a3;stroke-width:1}
svg .axis,svg .legend{font-size:11px;fill:#5c6675}
svg .empty{font-size:13px;fill:#8a94a3}
svg .line{fill:none;stroke-width:1.5}
svg .mean{stroke-dasharray:4 3}
svg circle.point{stroke:none}
svg .c0{stroke:#1f77b4} svg circle.c0{fill:#1f77b4}
svg .c1{stroke:#d9661f} svg circle.c1{fill:#d9661f}
svg .c2{stroke:#2b9348} svg circle.c2{fill:#2b9348}
svg .c3{stroke:#8e44ad} svg circle.c3{fill:#8e44ad}
svg circle.mean{fill-opacity:.5}
</style>
</head>
<body>
{{end}}`

const nodeTemplate = `{{template "head" (printf "kproxy on %s" .Node.NodeName)}}<header><h1>kproxy on <span id="node-name">{{.Node.NodeName}}</span>, <span id="mode">{{.Node.Mode}}</span> mode</h1></header>
<main>
<p class="muted">As of {{stamp .Now}}. The same data as JSON: <a href="/kproxy/v1alpha1/node">node</a>, <a href="/kproxy/v1alpha1/services">services</a>.</p>

<h2>Node</h2>
<table class="facts" id="summary">
<tr><th>Node</th><td>{{.Node.NodeName}}</td></tr>
<tr><th>Mode</th><td>{{.Node.Mode}}</td></tr>
<tr><th>Families</th><td>{{range $i, $f := .Node.Families}}{{if $i}}, {{end}}{{$f.Family}}{{else}}none{{end}}</td></tr>
</table>
{{range .Node.Families}}<h3>{{.Family}}</h3>
<table class="facts">
<tr><th>Zone</th><td>{{or .Zone "-"}}</td></tr>
<tr><th>ServicePorts</th><td>{{.ServicePorts}}</td></tr>
<tr><th>Local traffic detector</th><td>{{detector .LocalDetector}}</td></tr>
<tr><th>NodePort addresses</th><td>{{or (join .NodePortAddresses) "-"}}</td></tr>
<tr><th>ServiceCIDRs</th><td>{{or (join .ServiceCIDRs) "-"}}</td></tr>
<tr><th>Kernel vs applied</th><td>{{drift .LastDriftCheck}}</td></tr>
</table>
{{end}}
<h2>Last syncs</h2>
{{range $i, $f := .Node.Families}}<h3>{{$f.Family}}</h3>
{{with index $.Syncs $i}}<table class="syncs">
<tr><th>Start</th><th>Duration</th><th>Kind</th><th>Changed</th><th>Deleted</th><th>Operations</th><th>Result</th></tr>
{{range .}}<tr><td>{{stamp .Start}}</td><td class="num">{{seconds .Duration}}</td><td>{{kind .}}</td><td class="num">{{.Changed}}</td><td class="num">{{.Deleted}}</td><td class="num">{{.Operations}}</td>{{if .Error}}<td class="err">failed: {{.Error}}</td>{{else}}<td class="ok">ok</td>{{end}}</tr>
{{end}}</table>
{{else}}<p class="muted">No sync yet.</p>
{{end}}{{end}}
<h2>Last hour</h2>
<div class="charts">
<figure id="chart-durations"><figcaption>Sync durations (max and mean per 10 s)</figcaption>{{.Durations.SVG}}</figure>
<figure id="chart-programming"><figcaption>Network programming latency (max and mean per 10 s)</figcaption>{{.Programming.SVG}}</figure>
</div>

<h2>Errors</h2>
{{with .Errors}}<table id="errors">
<tr><th>Time</th><th>Family</th><th>Kind</th><th>Duration</th><th>Error</th></tr>
{{range .}}<tr><td>{{stamp .Start}}</td><td>{{.Family}}</td><td>{{kind .Sync}}</td><td class="num">{{seconds .Duration}}</td><td class="err">{{.Error}}</td></tr>
{{end}}</table>
{{else}}<p class="muted" id="errors">No failed sync kept (the last 32 per family are).</p>
{{end}}
<h2>Services</h2>
<form method="get" action="/kproxy/" id="search">
<label for="q">Namespace/name contains</label>
<input type="search" id="q" name="q" value="{{.Query}}">
<button type="submit">Search</button>{{if .Query}} <a href="/kproxy/">clear</a>{{end}}
</form>
<p id="service-count">{{count .Services}}</p>
{{with .Services.List.Items}}<table id="services">
<tr><th>Service</th><th>Family</th><th>Port</th><th>ClusterIP</th><th>NodePort</th><th>Endpoints (usable/all)</th></tr>
{{range .}}{{$svc := .}}{{range $i, $p := .Ports}}<tr>{{if not $i}}<td rowspan="{{len $svc.Ports}}"><a class="service" href="{{serviceURL $svc.Namespace $svc.Name}}">{{$svc.Namespace}}/{{$svc.Name}}</a></td>{{end}}<td>{{$p.Family}}</td><td>{{or $p.Name "(unnamed)"}} {{$p.Protocol}}/{{$p.Port}}</td><td>{{$p.ClusterIP}}</td><td class="num">{{if $p.NodePort}}{{$p.NodePort}}{{else}}-{{end}}</td><td class="num">{{$p.Usable}}/{{$p.Endpoints}}</td></tr>
{{end}}{{end}}</table>
{{end}}{{with .Next}}<p><a id="next" href="{{.}}">Next {{pageSize}} »</a></p>
{{end}}</main>
</body>
</html>
`

const serviceTemplate = `{{template "head" (printf "%s/%s on %s" .Service.Namespace .Service.Name .NodeName)}}<header><h1>Service <span id="service-name">{{.Service.Namespace}}/{{.Service.Name}}</span> on {{.NodeName}} ({{.Mode}} mode)</h1><a href="/kproxy/">« node {{.NodeName}}</a></header>
<main>
<p class="muted">As of {{stamp .Now}}: what this node does with the Service and why, as <code>kube-proxy explain service {{.Service.Namespace}}/{{.Service.Name}}</code> prints it. As JSON: <a href="/kproxy/v1alpha1/services/{{.Service.Namespace}}/{{.Service.Name}}">this Service</a>.</p>
{{range .Service.Ports}}{{$port := .}}<section class="port">
<h2>Port {{or .Name "(unnamed)"}} {{.Protocol}}/{{.Port}} ({{.Family}})</h2>
<table class="facts">
<tr><th>ClusterIP</th><td>{{.ClusterIP}}</td></tr>
{{if .NodePort}}<tr><th>NodePort</th><td>{{.NodePort}}</td></tr>
{{end}}{{with .ExternalIPs}}<tr><th>External IPs</th><td>{{join .}}</td></tr>
{{end}}{{with .LoadBalancerIPs}}<tr><th>Load-balancer IPs</th><td>{{join .}}</td></tr>
{{end}}{{with .LoadBalancerSourceRanges}}<tr><th>Allowed sources</th><td>{{join .}} (others are dropped)</td></tr>
{{end}}{{if .HealthCheckNodePort}}<tr><th>Health check NodePort</th><td>{{.HealthCheckNodePort}}</td></tr>
{{end}}{{if .SessionAffinitySeconds}}<tr><th>Session affinity</th><td>ClientIP, {{.SessionAffinitySeconds}} s</td></tr>
{{end}}{{with .TrafficDistribution}}<tr><th>Traffic distribution</th><td>{{.}}</td></tr>
{{end}}<tr><th>Internal traffic</th><td class="{{.Internal.Verdict}}">{{traffic .Internal .InternalTrafficPolicy}}</td></tr>
{{with .External}}<tr><th>External traffic</th><td class="{{.Verdict}}">{{traffic . $port.ExternalTrafficPolicy}}</td></tr>
{{end}}</table>
{{if .Endpoints}}<table class="endpoints">
<tr><th>Endpoint</th><th>Node</th><th>Zone</th><th>Conditions</th><th>Internal</th><th>External</th><th>External from node</th></tr>
{{range .Endpoints}}<tr><td class="endpoint">{{.Address}}</td><td>{{or .NodeName "-"}}</td><td>{{or .Zone "-"}}</td><td>{{conditions .}}</td><td class="{{.Internal}}">{{.Internal}}</td><td class="{{.External}}">{{.External}}</td><td class="{{.ExternalFromNode}}">{{.ExternalFromNode}}</td></tr>
{{end}}</table>
{{else}}<p class="muted">No endpoints.</p>
{{end}}{{with .KernelObjects}}<h3>Kernel objects</h3>
<pre>{{range .}}{{.}}
{{end}}</pre>
{{end}}</section>
{{end}}</main>
</body>
</html>
`
