package ipset

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	utilexec "k8s.io/utils/exec"
)

// command is the ipset tool's name, looked up in PATH as upstream does.
const command = "ipset"

// versionPattern finds the version in `ipset --version` ("ipset v7.19,
// protocol version: 7"), as upstream's VersionPattern.
var versionPattern = regexp.MustCompile(`v[0-9]+\.[0-9]+`)

// Exec implements Interface by running the ipset binary.
type Exec struct {
	exec utilexec.Interface
}

var _ Interface = (*Exec)(nil)

// New returns an Interface running ipset through exec (nil: the host's
// commands). It runs nothing.
func New(exec utilexec.Interface) *Exec {
	if exec == nil {
		exec = utilexec.New()
	}
	return &Exec{exec: exec}
}

// run runs ipset with args and stdin, returning its standard output; the
// error carries the tool's message.
func (e *Exec) run(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	cmd := e.exec.CommandContext(ctx, command, args...)
	// Always a stdin, even empty: upstream found that ipset --version may
	// otherwise wait on a terminal.
	cmd.SetStdin(bytes.NewReader(stdin))
	var stdout, stderr bytes.Buffer
	cmd.SetStdout(&stdout)
	cmd.SetStderr(&stderr)
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "does not exist") {
			return nil, fmt.Errorf("ipset %s: %w: %w: %s", strings.Join(args, " "), ErrNotFound, err, msg)
		}
		return nil, fmt.Errorf("ipset %s: %w: %s", strings.Join(args, " "), err, msg)
	}
	return stdout.Bytes(), nil
}

// Version implements Interface.
func (e *Exec) Version(ctx context.Context) (string, error) {
	out, err := e.run(ctx, nil, "--version")
	if err != nil {
		return "", err
	}
	v := versionPattern.Find(out)
	if v == nil {
		return "", fmt.Errorf("no ipset version found in %q", strings.TrimSpace(string(out)))
	}
	return string(v), nil
}

// ListSets implements Interface.
func (e *Exec) ListSets(ctx context.Context) ([]string, error) {
	out, err := e.run(ctx, nil, "list", "-n")
	if err != nil {
		return nil, err
	}
	names := strings.Fields(string(out))
	slices.Sort(names)
	return names, nil
}

// Entries implements Interface.
func (e *Exec) Entries(ctx context.Context, name string) ([]string, error) {
	if name == "" {
		return nil, fmt.Errorf("ipset: no set name")
	}
	out, err := e.run(ctx, nil, "save", name)
	if err != nil {
		return nil, err
	}
	sets, err := ParseSave(out)
	if err != nil {
		return nil, err
	}
	return sets[name], nil
}

// Save implements Interface.
func (e *Exec) Save(ctx context.Context) (map[string][]string, error) {
	out, err := e.run(ctx, nil, "save")
	if err != nil {
		return nil, err
	}
	return ParseSave(out)
}

// SaveSets runs `ipset save` and reads every set with its type, family and
// entries (ParseSaveSets), for readers that need more than Save's entries
// (`kube-proxy trace`).
func (e *Exec) SaveSets(ctx context.Context) ([]SavedSet, error) {
	out, err := e.run(ctx, nil, "save")
	if err != nil {
		return nil, err
	}
	return ParseSaveSets(out)
}

// Restore implements Interface.
func (e *Exec) Restore(ctx context.Context, script []byte) error {
	if len(script) == 0 {
		return nil
	}
	_, err := e.run(ctx, script, "restore", "-exist")
	return err
}

// Destroy implements Interface.
func (e *Exec) Destroy(ctx context.Context, name string) error {
	if name == "" {
		return fmt.Errorf("ipset: no set name")
	}
	_, err := e.run(ctx, nil, "destroy", name)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	return nil
}
