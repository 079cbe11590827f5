// Package ipset is kproxy's boundary to the kernel's IP sets, which the ipvs mode's
// iptables rules match on: value types for sets and their entries, written as the
// ipset tool prints them.
package ipset
