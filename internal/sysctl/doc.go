// Package sysctl is the boundary between kproxy and the kernel tunables it writes:
// sysctls under /proc/sys, module parameters under /sys/module and the process's
// oom_score_adj. Every tunable is behind a small interface with an in-memory fake,
// so the packages that decide *what* to write are tested without touching the host.
//
// Names are given in the slash form used under /proc/sys ("net/netfilter/nf_conntrack_max");
// the dotted form ("net.netfilter.nf_conntrack_max") is accepted too.
package sysctl
