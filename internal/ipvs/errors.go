package ipvs

import "errors"

// Errors that Interface's implementations wrap, so that callers can tell the
// cases apart with errors.Is whatever the implementation (kernel or Fake).
var (
	// ErrUnavailable: the kernel has no IPVS (ip_vs neither built in nor
	// loaded), so there is nothing to read and nothing can be programmed.
	ErrUnavailable = errors.New("kernel has no IP_VS")
	// ErrNotFound: the virtual server or real server named does not exist
	// (the kernel's ESRCH for a service, ENOENT for a destination).
	ErrNotFound = errors.New("not found")
	// ErrExists: the virtual server or real server being added exists already
	// (the kernel's EEXIST).
	ErrExists = errors.New("already exists")
)
