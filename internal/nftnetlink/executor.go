package nftnetlink

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
	"sigs.k8s.io/knftables"
)

// Options configure an Executor.
type Options struct {
	// NetNSPath, when set, is the network namespace (e.g. /run/netns/x or
	// /proc/<pid>/ns/net) whose nftables the executor programs; default: the
	// caller's.
	NetNSPath string
	// Lister serves the List* methods of knftables.Interface but ListAll (typically the
	// knftables.New interface for the same family and table); nil makes them fail.
	Lister knftables.Interface
	// LargeTransaction, when set, is called before running a transaction of more
	// than LargeTransactionOps operations, and the function it returns after; the
	// process may use it to bound the transient memory of a full sync (the caller
	// owns process-wide knobs such as the GC target, not this package).
	LargeTransaction func(ops int) (done func())
	// WrapConn, when set, wraps every netlink socket the executor opens (tests
	// inject socket faults with it: internal/nftnetlink/nlfault). nil: the
	// sockets' system calls are made as they are.
	WrapConn func(Conn) Conn
}

// LargeTransactionOps is the size (operations) from which Options.LargeTransaction
// is called: a full sync of 10,000 Services is ~158,000 operations, ~17 MB of text
// and ~46 MB of netlink; deltas are far smaller.
const LargeTransactionOps = 20000

// Executor runs knftables transactions of one table over netlink. It is safe for
// concurrent use; each Run uses its own socket.
type Executor struct {
	family  knftables.Family
	nfproto byte
	table   string
	opts    Options
	fake    *knftables.Fake
}

var _ knftables.Interface = (*Executor)(nil)

// New returns an executor for the table of family ip or ip6. It does no I/O.
func New(family knftables.Family, table string, opts Options) (*Executor, error) {
	var nfproto byte
	switch family {
	case knftables.IPv4Family:
		nfproto = unix.NFPROTO_IPV4
	case knftables.IPv6Family:
		nfproto = unix.NFPROTO_IPV6
	default:
		return nil, fmt.Errorf("nftnetlink: family %q is not supported (ip and ip6 are)", family)
	}
	if table == "" {
		return nil, fmt.Errorf("nftnetlink: no table name")
	}
	return &Executor{family: family, nfproto: nfproto, table: table, opts: opts, fake: knftables.NewFake(family, table)}, nil
}

// NewTransaction returns an empty transaction whose objects default to the
// executor's family and table.
func (e *Executor) NewTransaction() *knftables.Transaction {
	// A Fake's transactions carry the family/table context and nothing else: the
	// Fake itself is never run.
	return e.fake.NewTransaction()
}

// Run applies tx atomically.
func (e *Executor) Run(ctx context.Context, tx *knftables.Transaction) error {
	return e.run(ctx, tx, true)
}

// Check sends tx to the kernel, which validates it and then discards it.
func (e *Executor) Check(ctx context.Context, tx *knftables.Transaction) error {
	return e.run(ctx, tx, false)
}

func (e *Executor) run(ctx context.Context, tx *knftables.Transaction, commit bool) error {
	if tx.NumOperations() == 0 {
		// An empty transaction may still carry a pending error.
		if err := txError(tx.String()); err != nil {
			return err
		}
		return ctx.Err()
	}
	if n := tx.NumOperations(); n > LargeTransactionOps && e.opts.LargeTransaction != nil {
		defer e.opts.LargeTransaction(n)()
	}
	return e.apply(ctx, partTexts(func(yield func(*knftables.Transaction) bool) { yield(tx) }), commit)
}

// RunScript applies the nft command texts that script yields, in order,
// atomically, as if they were the text of one transaction (tx.String(): the
// commands this package supports, see the package documentation): they go into one
// nfnetlink batch. Each text is translated and then dropped, so a large
// transaction (render/nftables.FullScript) never exists whole, neither as
// knftables objects nor as text; element commands may refer to sets and maps
// created by an earlier text. The daemon writes full syncs with RunOps, which
// needs no text at all.
//
// script may be iterated twice: a second time, after the kernel rejected the
// batch, to quote the failing command in the error (only its position is kept). It
// must yield the same texts again.
//
// The script is produced on another goroutine, ahead of the translation by at most
// a few texts: writing the text and translating it then use two cores.
func (e *Executor) RunScript(ctx context.Context, script iter.Seq[string]) error {
	if e.opts.LargeTransaction != nil {
		defer e.opts.LargeTransaction(0)()
	}
	return e.apply(ctx, readAhead(script, 2), true)
}

// readAhead yields the values of seq, which a goroutine of its own computes up to
// depth values ahead. The goroutine ends before the iteration does.
func readAhead(seq iter.Seq[string], depth int) iter.Seq[string] {
	return func(yield func(string) bool) {
		values := make(chan string, depth)
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer close(values)
			for v := range seq {
				select {
				case values <- v:
				case <-stop:
					return
				}
			}
		}()
		defer func() {
			close(stop)
			<-done
		}()
		for v := range values {
			if !yield(v) {
				return
			}
		}
	}
}

// txError returns the error knftables recorded in a transaction (it prints it as a
// trailing "# ERROR:" line), if any.
func txError(text string) error {
	if i := strings.Index(text, "# ERROR: "); i >= 0 {
		return fmt.Errorf("nftnetlink: transaction error: %s", strings.TrimSpace(text[i+len("# ERROR: "):]))
	}
	return nil
}

// batchChunkSize is the capacity of the chunks a batch is built in (see builder).
const batchChunkSize = 1 << 20

// maxBatchChunks stays below the kernel's limit of iovecs per sendmsg (UIO_MAXIOV).
const maxBatchChunks = 1000

// apply sends the commands of the transaction texts as one batch.
func (e *Executor) apply(ctx context.Context, texts iter.Seq[string], commit bool) error {
	return e.send(ctx, func(sock *socket) (*builder, error) { return e.build(texts, sock, commit) },
		func(ref commandRef) string { return commandAt(texts, ref) })
}

// send opens a socket, builds one batch on it (build may ask the kernel for set
// types), sends it and reports the kernel's errors, each with the text quote gives
// for the failing command.
func (e *Executor) send(ctx context.Context, build func(*socket) (*builder, error), quote func(commandRef) string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	sock, err := e.openSocket()
	if err != nil {
		return fmt.Errorf("nftnetlink: %w", err)
	}
	defer sock.close()
	b, err := build(sock)
	if err != nil {
		return err
	}
	bufs := b.buffers()
	if len(bufs) > maxBatchChunks {
		bufs = [][]byte{slices.Concat(bufs...)}
	}
	if err := sock.sendBuffers(bufs); err != nil {
		return fmt.Errorf("nftnetlink: %w", err)
	}
	return collectErrors(sock, b, quote)
}

// partTexts yields the text of each transaction of parts (tx.String(), the
// executor's contract with knftables: see the package documentation).
func partTexts(parts iter.Seq[*knftables.Transaction]) iter.Seq[string] {
	return func(yield func(string) bool) {
		for tx := range parts {
			if !yield(tx.String()) {
				return
			}
		}
	}
}

// build translates the transaction texts into one batch (BEGIN, messages, and
// END unless the batch is only to be checked: without BATCH_END the kernel
// validates the batch and then aborts it).
func (e *Executor) build(texts iter.Seq[string], sock *socket, commit bool) (*builder, error) {
	t := e.newTranslator(sock)
	b := t.b
	part := int32(0)
	for text := range texts {
		if err := txError(text); err != nil {
			return nil, err
		}
		t.at = commandRef{Part: part, Line: -1}
		for line := range strings.Lines(text) {
			t.at.Line++
			line = strings.TrimRight(line, "\n")
			if strings.TrimSpace(line) == "" {
				continue
			}
			if err := t.command(line); err != nil {
				return nil, fmt.Errorf("nftnetlink: %q: %w", line, err)
			}
		}
		part++
	}
	t.end(commit)
	return b, nil
}

// newTranslator starts a batch (BATCH_BEGIN) and its translator; sock, when not
// nil, answers questions about sets the batch does not define.
func (e *Executor) newTranslator(sock *socket) *translator {
	b := &builder{buf: make([]byte, 0, batchChunkSize), chunkSize: batchChunkSize}
	m := b.beginMsg(unix.NFNL_MSG_BATCH_BEGIN, unix.NLM_F_REQUEST, unix.AF_UNSPEC, unix.NFNL_SUBSYS_NFTABLES)
	b.endMsg(m)
	return &translator{
		b: b, family: string(e.family), nfproto: e.nfproto, table: e.table,
		sets:       map[string]*setInfo{},
		rulePrefix: "add rule " + string(e.family) + " " + e.table + " ",
		lookup: func(name string) (*setInfo, error) {
			if sock == nil {
				return nil, fmt.Errorf("not defined in the transaction")
			}
			return getSet(sock, e.nfproto, e.table, name)
		},
	}
}

// end ends the batch: with BATCH_END unless it is only to be checked (without it
// the kernel validates the batch and then aborts it).
func (t *translator) end(commit bool) {
	t.flushElems()
	if commit {
		m := t.b.beginMsg(unix.NFNL_MSG_BATCH_END, unix.NLM_F_REQUEST, unix.AF_UNSPEC, unix.NFNL_SUBSYS_NFTABLES)
		t.b.endMsg(m)
	}
}

// commandAt returns the text of the command at ref, iterating texts again.
func commandAt(texts iter.Seq[string], ref commandRef) string {
	part := int32(0)
	for text := range texts {
		if part == ref.Part {
			line := int32(0)
			for l := range strings.Lines(text) {
				if line == ref.Line {
					return strings.TrimRight(l, "\n")
				}
				line++
			}
			return ""
		}
		part++
	}
	return ""
}

// maxQuotedErrors bounds the errors of one batch reported with their command.
const maxQuotedErrors = 8

// collectErrors reads the error replies queued by the batch (there are none when
// it was committed).
func collectErrors(sock *socket, b *builder, commandText func(commandRef) string) error {
	var errs []error
	for {
		replies, err := sock.recv(false)
		if err != nil {
			if errors.Is(err, syscall.ENOBUFS) {
				// The kernel dropped replies that did not fit the receive
				// buffer: a committed batch queues none, so there were errors.
				// Not a SocketError: the kernel refused the batch.
				errs = append(errs, fmt.Errorf("too many errors to report: %w", syscall.ENOBUFS))
				break
			}
			// The kernel took the batch (sendmsg succeeded) and may have
			// committed it; only its replies are lost.
			return fmt.Errorf("nftnetlink: batch sent, outcome unknown: %w", err)
		}
		if replies == nil {
			break
		}
		for _, r := range replies {
			if r.typ != unix.NLMSG_ERROR {
				continue
			}
			seq, code := r.errno()
			if code == nil {
				continue
			}
			// Quoting a command may translate the transaction's text again: only
			// the first few errors are quoted.
			if ref, ok := b.commandFor(seq); ok && len(errs) < maxQuotedErrors {
				cmd := commandText(ref)
				errs = append(errs, fmt.Errorf("%q: %w", cmd, code))
			} else {
				errs = append(errs, fmt.Errorf("batch: %w", code))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("nftnetlink: transaction failed, nothing applied: %w", errors.Join(errs...))
	}
	return nil
}

// getSet asks the kernel for the type of an existing set (for element commands of
// a transaction that does not define the set).
func getSet(sock *socket, nfproto byte, table, name string) (*setInfo, error) {
	var info *setInfo
	var decodeErr error
	err := exchange(sock, unix.NFT_MSG_GETSET, unix.NLM_F_ACK, nfproto, func(b *builder) {
		b.attrString(unix.NFTA_SET_TABLE, table)
		b.attrString(unix.NFTA_SET_NAME, name)
	}, func(msg []byte) {
		if info == nil && decodeErr == nil {
			info, decodeErr = decodeSet(msg)
		}
	})
	switch {
	case err != nil:
		return nil, err
	case decodeErr != nil:
		return nil, decodeErr
	case info == nil:
		return nil, fmt.Errorf("no reply")
	}
	return info, nil
}

func decodeSet(data []byte) (*setInfo, error) {
	a := attrs(data)
	u32 := func(t uint16) uint32 {
		if v := a[t]; len(v) == 4 {
			return binary.BigEndian.Uint32(v)
		}
		return 0
	}
	info := &setInfo{flags: u32(unix.NFTA_SET_FLAGS)}
	var err error
	if info.key, err = keyTypeFromID(u32(unix.NFTA_SET_KEY_TYPE), int(u32(unix.NFTA_SET_KEY_LEN))); err != nil {
		return nil, err
	}
	if info.flags&unix.NFT_SET_MAP != 0 {
		d, err := keyTypeFromID(u32(unix.NFTA_SET_DATA_TYPE), int(u32(unix.NFTA_SET_DATA_LEN)))
		if err != nil {
			return nil, err
		}
		info.data = &d
	}
	return info, nil
}

// List is delegated to Options.Lister.
func (e *Executor) List(ctx context.Context, objectType string) ([]string, error) {
	if e.opts.Lister == nil {
		return nil, errNoLister
	}
	return e.opts.Lister.List(ctx, objectType)
}

// ListRules is delegated to Options.Lister.
func (e *Executor) ListRules(ctx context.Context, chain string) ([]*knftables.Rule, error) {
	if e.opts.Lister == nil {
		return nil, errNoLister
	}
	return e.opts.Lister.ListRules(ctx, chain)
}

// ListElements is delegated to Options.Lister.
func (e *Executor) ListElements(ctx context.Context, objectType, name string) ([]*knftables.Element, error) {
	if e.opts.Lister == nil {
		return nil, errNoLister
	}
	return e.opts.Lister.ListElements(ctx, objectType, name)
}

// ListCounters is delegated to Options.Lister.
func (e *Executor) ListCounters(ctx context.Context) ([]*knftables.Counter, error) {
	if e.opts.Lister == nil {
		return nil, errNoLister
	}
	return e.opts.Lister.ListCounters(ctx)
}

var errNoLister = errors.New("nftnetlink: listing needs Options.Lister")
