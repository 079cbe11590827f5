package statuspage

import (
	"bytes"
	"net/http"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kproxy/kproxy/internal/inspect"
)

// Handler serves the pages under Path: GET Path (the node page, ?q= filters the
// Services, ?continue= pages them) and GET Path+"services/NS/NAME" (one Service).
// Every other path under Path is 404; inspect.PathPrefix, below Path, is the state
// API's and must be registered beside this handler. now is the clock of the pages
// (time.Now when nil); src must not change once the handler serves.
func Handler(src *inspect.Source, now func() time.Time) http.Handler {
	if now == nil {
		now = time.Now
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Path+"{$}", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		page := BuildNodePage(src, now(), q.Get("q"), q.Get("continue"))
		writeHTML(w, http.StatusOK, func(b *bytes.Buffer) error { return RenderNode(b, page) })
	})
	mux.HandleFunc("GET "+Path+"services/{namespace}/{name}", func(w http.ResponseWriter, r *http.Request) {
		name := types.NamespacedName{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
		svc, ok := inspect.BuildService(src.Families, name, "")
		if !ok {
			http.Error(w, "no Service "+name.String()+" in this proxy's model", http.StatusNotFound)
			return
		}
		page := &ServicePage{Now: now(), NodeName: src.NodeName, Mode: src.Mode, Service: svc}
		writeHTML(w, http.StatusOK, func(b *bytes.Buffer) error { return RenderService(b, page) })
	})
	mux.HandleFunc(Path, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such page: "+r.URL.Path, http.StatusNotFound)
	})
	return mux
}

// writeHTML renders into a buffer first, so that a template failure is a 500
// rather than half a page.
func writeHTML(w http.ResponseWriter, code int, render func(*bytes.Buffer) error) {
	var b bytes.Buffer
	if err := render(&b); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	// The page loads nothing from elsewhere; say so to the browser as well.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'")
	w.WriteHeader(code)
	// The client may have gone; there is no one left to tell.
	_, _ = w.Write(b.Bytes())
}
