package inspect

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Source is what the handler serves from: the node's name, the proxy mode, and
// the families (primary first).
type Source struct {
	NodeName string
	Mode     string
	Families []Family
}

// Handler serves the state API under PathPrefix (see the package documentation).
// src must not change once the handler serves.
func Handler(src *Source) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PathPrefix+"node", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, BuildNode(src.NodeName, src.Mode, src.Families))
	})
	mux.HandleFunc("GET "+PathPrefix+"services", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		limit := 0
		if s := q.Get("limit"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 {
				writeError(w, http.StatusBadRequest, "limit: not a non-negative integer: "+strconv.Quote(s))
				return
			}
			limit = n
		}
		writeJSON(w, http.StatusOK, BuildServiceList(src.Families, q.Get("namespace"), q.Get("continue"), limit))
	})
	mux.HandleFunc("GET "+PathPrefix+"services/{namespace}/{name}", func(w http.ResponseWriter, r *http.Request) {
		name := types.NamespacedName{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
		port := r.URL.Query().Get("port")
		svc, ok := BuildService(src.Families, name, port)
		if !ok {
			msg := "no Service " + name.String() + " in this proxy's model"
			if port != "" {
				msg = "no port " + strconv.Quote(port) + " of Service " + name.String() + " in this proxy's model"
			}
			writeError(w, http.StatusNotFound, msg)
			return
		}
		writeJSON(w, http.StatusOK, svc)
	})
	mux.HandleFunc("GET "+PathPrefix+"verify", verifyHandler(src))
	mux.HandleFunc("GET "+PathPrefix+"lookup", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		ip, err := netip.ParseAddr(q.Get("ip"))
		if err != nil {
			writeError(w, http.StatusBadRequest, "ip: not an IP address: "+strconv.Quote(q.Get("ip")))
			return
		}
		port, err := strconv.ParseUint(q.Get("port"), 10, 16)
		if err != nil {
			writeError(w, http.StatusBadRequest, "port: not a port number: "+strconv.Quote(q.Get("port")))
			return
		}
		proto := v1.ProtocolTCP
		if s := q.Get("protocol"); s != "" {
			proto = v1.Protocol(strings.ToUpper(s))
		}
		if proto != v1.ProtocolTCP && proto != v1.ProtocolUDP && proto != v1.ProtocolSCTP {
			writeError(w, http.StatusBadRequest, "protocol: not tcp, udp or sctp: "+strconv.Quote(q.Get("protocol")))
			return
		}
		writeJSON(w, http.StatusOK, BuildLookup(src.Families, ip, int32(port), proto))
	})
	mux.HandleFunc(PathPrefix, func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such document: "+strings.TrimPrefix(r.URL.Path, PathPrefix))
	})
	return mux
}

// Status is the body of an error response.
type Status struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Code       int    `json:"code"`
	Message    string `json:"message"`
}

func writeError(w http.ResponseWriter, code int, message string) {
	writeJSON(w, code, Status{APIVersion: APIVersion, Kind: "Status", Code: code, Message: message})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	// The client may have gone; there is no one left to tell.
	_ = json.NewEncoder(w).Encode(v)
}
