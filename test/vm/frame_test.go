package vm

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestFramesRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := &frameWriter{w: &buf}
	big := strings.Repeat("x", maxFrame+10)
	if _, err := (streamWriter{f: w, kind: frameStdout}).Write([]byte(big)); err != nil {
		t.Fatal(err)
	}
	if err := w.send(frameExit, exitPayload(-2)); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for {
		f, err := readFrame(&buf)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch f.kind {
		case frameStdout:
			out.Write(f.data)
		case frameExit:
			if code, err := exitCode(f.data); err != nil || code != -2 {
				t.Errorf("exit code %d, %v; want -2", code, err)
			}
		}
	}
	if out.String() != big {
		t.Errorf("stdout of %d bytes came back as %d", len(big), out.Len())
	}
}
