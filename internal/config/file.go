package config

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/kube-proxy/config/v1alpha1"
	"sigs.k8s.io/yaml"
)

// codecs returns strict or lenient codecs knowing only kubeproxy.config.k8s.io/v1alpha1,
// so any other apiVersion or kind is refused.
func codecs(strict bool) (serializer.CodecFactory, error) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return serializer.CodecFactory{}, fmt.Errorf("registering kube-proxy config API: %w", err)
	}
	mode := serializer.DisableStrict
	if strict {
		mode = serializer.EnableStrict
	}
	return serializer.NewCodecFactory(scheme, mode), nil
}

// DecodeFile decodes a KubeProxyConfiguration (YAML or JSON) without defaulting.
// Like upstream it decodes strictly first; when only strictness fails (unknown
// or duplicate fields) it decodes leniently and returns the strict error as
// lenientReason, which the caller should log as a warning. Anything else
// (syntax, wrong apiVersion or kind) is an error.
func DecodeFile(data []byte) (obj *v1alpha1.KubeProxyConfiguration, lenientReason error, err error) {
	strictCodecs, err := codecs(true)
	if err != nil {
		return nil, nil, err
	}
	decoded, gvk, err := strictCodecs.UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		if !runtime.IsStrictDecodingError(err) {
			if path := locateDecodeError(data); path != "" {
				return nil, nil, fmt.Errorf("failed to decode: %s: %w", path, err)
			}
			return nil, nil, fmt.Errorf("failed to decode: %w", err)
		}
		lenientReason = err
		lenientCodecs, cerr := codecs(false)
		if cerr != nil {
			return nil, nil, cerr
		}
		var lerr error
		decoded, gvk, lerr = lenientCodecs.UniversalDeserializer().Decode(data, nil, nil)
		if lerr != nil {
			return nil, nil, fmt.Errorf("failed lenient decoding: %w", err)
		}
	}
	cfg, ok := decoded.(*v1alpha1.KubeProxyConfiguration)
	if !ok {
		return nil, nil, fmt.Errorf("got unexpected config type: %v", gvk)
	}
	return cfg, lenientReason, nil
}

// locateDecodeError finds the field whose value made decoding fail (the
// decoder's own errors, e.g. for a bad duration, do not always say), by
// decoding each leaf of the document on its own. It returns "" if the
// document is not a mapping or no single leaf fails.
func locateDecodeError(data []byte) string {
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return ""
	}
	lenient, err := codecs(false)
	if err != nil {
		return ""
	}
	decoder := lenient.UniversalDeserializer()
	// If the type itself is the problem, no field is to blame.
	typeOnly, err := yaml.Marshal(map[string]any{"apiVersion": doc["apiVersion"], "kind": doc["kind"]})
	if err != nil {
		return ""
	}
	if _, _, err := decoder.Decode(typeOnly, nil, nil); err != nil {
		return ""
	}
	var found string
	var walk func(path []string, v any)
	walk = func(path []string, v any) {
		if found != "" {
			return
		}
		if m, ok := v.(map[string]any); ok {
			for _, k := range slices.Sorted(maps.Keys(m)) {
				if len(path) == 0 && (k == "apiVersion" || k == "kind") {
					continue
				}
				walk(append(slices.Clone(path), k), m[k])
			}
			return
		}
		if len(path) == 0 {
			return
		}
		// A document holding only this leaf (and the type) under its path.
		probe := map[string]any{"apiVersion": doc["apiVersion"], "kind": doc["kind"]}
		cur := probe
		for _, k := range path[:len(path)-1] {
			next := map[string]any{}
			cur[k] = next
			cur = next
		}
		cur[path[len(path)-1]] = v
		body, err := yaml.Marshal(probe)
		if err != nil {
			return
		}
		if _, _, err := decoder.Decode(body, nil, nil); err != nil {
			found = strings.Join(path, ".")
		}
	}
	walk(nil, doc)
	return found
}

// EncodeYAML renders obj as a kubeproxy.config.k8s.io/v1alpha1 YAML document.
func EncodeYAML(obj *v1alpha1.KubeProxyConfiguration) ([]byte, error) {
	c, err := codecs(true)
	if err != nil {
		return nil, err
	}
	info, ok := runtime.SerializerInfoForMediaType(c.SupportedMediaTypes(), runtime.ContentTypeYAML)
	if !ok {
		return nil, fmt.Errorf("unable to locate encoder -- %q is not a supported media type", runtime.ContentTypeYAML)
	}
	var buf bytes.Buffer
	if err := c.EncoderForVersion(info.Serializer, v1alpha1.SchemeGroupVersion).Encode(obj, &buf); err != nil {
		return nil, fmt.Errorf("encoding configuration: %w", err)
	}
	return buf.Bytes(), nil
}

// WriteFile writes obj as YAML to path (--write-config-to).
func WriteFile(path string, obj *v1alpha1.KubeProxyConfiguration) error {
	data, err := EncodeYAML(obj)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("writing configuration: %w", err)
	}
	return nil
}
