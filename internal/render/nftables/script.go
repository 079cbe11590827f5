package nftables

import (
	"iter"
	"strconv"
	"strings"

	"sigs.k8s.io/knftables"
)

// FullScript yields the full sync of s (WriteFull's transaction) as nft command
// text, in pieces of about partBytes that end at a line break, for a writer that
// applies a sequence of texts as one transaction (nftnetlink.Executor.RunScript).
// The concatenated pieces are byte for byte the text knftables writes for
// WriteFull's transaction (tx.String(): the executor's contract with knftables),
// but written directly: a full sync at 10,000 Services is ~140,000 operations, and
// building a knftables object for each, then formatting it with fmt, costs more
// than translating the text to netlink; and only one piece exists at a time.
// Every iteration yields the same pieces.
func FullScript(s *State, family knftables.Family, partBytes int) iter.Seq[string] {
	return s.script(nil, family, partBytes)
}

// RefreshScript is FullScript for WriteRefresh's transaction: the table, which
// holds existing, is kept, and so is session-affinity memory.
func RefreshScript(s *State, existing *Existing, family knftables.Family, partBytes int) iter.Seq[string] {
	if existing == nil {
		existing = &Existing{}
	}
	return s.script(existing, family, partBytes)
}

func (s *State) script(existing *Existing, family knftables.Family, partBytes int) iter.Seq[string] {
	return func(yield func(string) bool) {
		w := scriptWriter{prefix: " " + string(family) + " " + TableName + " ", fake: knftables.NewFake(family, TableName)}
		w.buf.Grow(partBytes + partBytes/8)
		stopped := false
		s.fullOps(existing, func(op fullOp) {
			if stopped {
				return
			}
			w.write(op)
			if w.buf.Len() >= partBytes {
				stopped = !yield(w.buf.String())
				w.buf = strings.Builder{}
				w.buf.Grow(partBytes + partBytes/8)
			}
		})
		if !stopped && w.buf.Len() > 0 {
			yield(w.buf.String())
		}
	}
}

// scriptWriter writes operations as knftables' writeOperation does (objects.go in
// sigs.k8s.io/knftables); TestFullScriptIsWriteFullText holds the two together.
type scriptWriter struct {
	buf    strings.Builder
	prefix string // " ip kube-proxy "
	// fake only makes transactions (with the family and table) to format objects.
	fake *knftables.Fake
	// scratch holds one rule's text, reused rule after rule.
	scratch []byte
}

func (w *scriptWriter) write(op fullOp) {
	switch op.kind {
	case opAddRule:
		w.command("add rule", op.chain.Name)
		w.buf.WriteByte(' ')
		w.scratch = op.rule.AppendText(w.scratch[:0])
		w.buf.Write(w.scratch)
		w.buf.WriteByte('\n')
	case opAddElement:
		w.command("add element", op.id.container)
		w.buf.WriteString(" { ")
		w.buf.WriteString(op.id.key)
		w.comment(op.claim.comment)
		if op.claim.value != "" {
			w.buf.WriteString(" : ")
			w.buf.WriteString(op.claim.value)
		}
		w.buf.WriteString(" }\n")
	case opAddChain:
		if c := op.chain; c.Hook == nil && c.Comment == "" {
			w.line("add chain", c.Name)
			return
		}
		w.knftables(func(tx *knftables.Transaction) { tx.Add(op.chain.object()) })
	case opAddContainer:
		w.knftables(func(tx *knftables.Transaction) { tx.Add(op.container.addObject()) })
	case opAddTable:
		w.knftables(func(tx *knftables.Transaction) { tx.Add(tableObject()) })
	case opDeleteTable:
		w.knftables(func(tx *knftables.Transaction) { tx.Delete(&knftables.Table{}) })
	case opFlushChain:
		w.line("flush chain", op.name)
	case opDeleteChain:
		w.line("delete chain", op.name)
	case opFlushContainer:
		w.line(containerVerb("flush", op.isMap), op.name)
	case opDeleteContainer:
		w.line(containerVerb("delete", op.isMap), op.name)
	case opAddCounter:
		w.line("add counter", op.counter.Name)
	case opDeleteCounter:
		w.line("delete counter", op.name)
	}
}

// command writes the start of a command on the object name, e.g. "add rule ip
// kube-proxy services".
func (w *scriptWriter) command(command, name string) {
	w.buf.WriteString(command)
	w.buf.WriteString(w.prefix)
	w.buf.WriteString(name)
}

// line writes a whole command on the object name, e.g. "flush chain ip kube-proxy x".
func (w *scriptWriter) line(command, name string) {
	w.command(command, name)
	w.buf.WriteByte('\n')
}

// comment writes ` comment "text"` unless text is empty.
func (w *scriptWriter) comment(text string) {
	if text != "" {
		w.buf.WriteString(" comment ")
		w.buf.WriteString(strconv.Quote(text))
	}
}

func containerVerb(verb string, isMap bool) string {
	if isMap {
		return verb + " map"
	}
	return verb + " set"
}

// knftables writes the few objects with options (base chains, sets and maps, the
// table) through knftables itself.
func (w *scriptWriter) knftables(add func(*knftables.Transaction)) {
	tx := w.fake.NewTransaction()
	add(tx)
	w.buf.WriteString(tx.String())
}
