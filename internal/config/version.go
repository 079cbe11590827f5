package config

// Version is the version kproxy reports (--version, metrics). Release builds set it:
//
//	go build -ldflags "-X github.com/kproxy/kproxy/internal/config.Version=v1.37.2-kproxy"
var Version = "v1.37.2-kproxy-dev"
