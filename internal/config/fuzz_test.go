package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// FuzzConfigFile: a --config file, whatever its bytes, is decoded (strictly, then
// leniently with a warning), defaulted and validated by Complete, as the command
// does (internal/app), into a Config or an error; never a panic. A file that
// validates, written back as --write-config-to writes it (EncodeYAML of the
// effective configuration), decodes strictly and validates again into the same
// configuration. Seeds: the differential suite's corpus of config files
// (test/e2e/differential/testdata/corpus) and kubeadm's ConfigMap; the corpus is in
// testdata/fuzz. `make fuzz` runs it (hack/fuzz.sh).
func FuzzConfigFile(f *testing.F) {
	files, err := filepath.Glob("../../test/e2e/differential/testdata/corpus/*.yaml")
	if err != nil || len(files) == 0 {
		f.Fatalf("no differential corpus: %v", err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		var input struct {
			Config string `json:"config"`
		}
		if err := yaml.Unmarshal(data, &input); err != nil {
			f.Fatalf("%s: %v", file, err)
		}
		if input.Config != "" {
			f.Add([]byte(input.Config))
		}
	}
	kubeadm, err := os.ReadFile("testdata/kubeadm-config.conf")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(kubeadm)
	f.Add([]byte("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: nftables\nmode: iptables\nbogus: 1\n"))
	f.Add([]byte(`{"apiVersion":"kubeproxy.config.k8s.io/v1alpha1","kind":"KubeProxyConfiguration","nftables":{"syncPeriod":"1m"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := complete(t, "--config="+path)
		if err != nil {
			return
		}
		written, err := EncodeYAML(cfg.V1Alpha1)
		if err != nil {
			t.Fatalf("EncodeYAML of a valid configuration: %v", err)
		}
		if _, lenientReason, err := DecodeFile(written); err != nil || lenientReason != nil {
			t.Fatalf("the written configuration does not decode strictly: %v, %v\n%s", err, lenientReason, written)
		}
		again := filepath.Join(dir, "written.yaml")
		if err := os.WriteFile(again, written, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg2, err := complete(t, "--config="+again)
		if err != nil {
			t.Fatalf("the written configuration does not validate: %v\n%s", err, written)
		}
		// The written file names the effective mode, so it is no longer defaulted.
		cfg2.ModeDefaulted = cfg.ModeDefaulted
		if diff := cmp.Diff(cfg, cfg2, cmpConfig...); diff != "" {
			t.Fatalf("the written configuration reads back differently (-first +again):\n%s\nwritten:\n%s", diff, written)
		}
		if diff := cmp.Diff(cfg.V1Alpha1, cfg2.V1Alpha1); diff != "" {
			t.Fatalf("the written configuration's effective configuration differs (-first +again):\n%s\nwritten:\n%s", diff, written)
		}
	})
}
