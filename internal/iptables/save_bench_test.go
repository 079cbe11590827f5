package iptables

import (
	"fmt"
	"strings"
	"testing"
)

// benchSave is iptables-save output of the nat table shaped like the iptables
// proxier's at n Services of 10 endpoints each (about 25 rules per Service).
func benchSave(n int) []byte {
	var b strings.Builder
	b.WriteString("*nat\n:PREROUTING ACCEPT [0:0]\n:KUBE-SERVICES - [0:0]\n")
	for i := range n {
		fmt.Fprintf(&b, ":KUBE-SVC-%012d - [0:0]\n", i)
		for e := range 10 {
			fmt.Fprintf(&b, ":KUBE-SEP-%08d%04d - [0:0]\n", i, e)
		}
	}
	for i := range n {
		fmt.Fprintf(&b, "-A KUBE-SERVICES -d 10.96.%d.%d/32 -p tcp -m comment --comment \"ns%d/svc%d:http cluster IP\" -m tcp --dport 80 -j KUBE-SVC-%012d\n", i/256, i%256, i, i, i)
		fmt.Fprintf(&b, "-A KUBE-SVC-%012d ! -s 10.244.0.0/16 -d 10.96.%d.%d/32 -p tcp -m comment --comment \"ns%d/svc%d:http cluster IP\" -m tcp --dport 80 -j KUBE-MARK-MASQ\n", i, i/256, i%256, i, i)
		for e := range 10 {
			fmt.Fprintf(&b, "-A KUBE-SVC-%012d -m comment --comment \"ns%d/svc%d:http -> 10.244.%d.%d:8080\" -m statistic --mode random --probability 0.%d -j KUBE-SEP-%08d%04d\n", i, i, i, i%200, e, 9-e, i, e)
			fmt.Fprintf(&b, "-A KUBE-SEP-%08d%04d -s 10.244.%d.%d/32 -m comment --comment \"ns%d/svc%d:http\" -j KUBE-MARK-MASQ\n", i, e, i%200, e, i, i)
			fmt.Fprintf(&b, "-A KUBE-SEP-%08d%04d -p tcp -m comment --comment \"ns%d/svc%d:http\" -m tcp -j DNAT --to-destination 10.244.%d.%d:8080\n", i, e, i, i, i%200, e)
		}
	}
	b.WriteString("COMMIT\n")
	return []byte(b.String())
}

// BenchmarkParseSave1k: what a drift check of the iptables mode spends reading the
// kernel's nat table at 1,000 Services.
func BenchmarkParseSave1k(b *testing.B) {
	data := benchSave(1000)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseSave(data); err != nil {
			b.Fatal(err)
		}
	}
}
