package node

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// GetHostname returns the node name: the override if set, otherwise the machine's
// hostname; trimmed and lowercased, as Kubernetes node names are.
func GetHostname(override string) (string, error) {
	return getHostname(override, os.Hostname)
}

func getHostname(override string, hostname func() (string, error)) (string, error) {
	name := override
	if name == "" {
		h, err := hostname()
		if err != nil {
			return "", fmt.Errorf("couldn't determine hostname: %w", err)
		}
		name = h
	}
	name = strings.TrimSpace(name)
	if name == "" {
		return "", errors.New("empty hostname is invalid")
	}
	return strings.ToLower(name), nil
}
