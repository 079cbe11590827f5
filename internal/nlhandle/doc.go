// Package nlhandle opens vishvananda/netlink handles in the network namespace at a
// path (/run/netns/NAME, /proc/PID/ns/net), or in the caller's: the one place the
// ipvs mode's kernel boundaries (internal/ipvs for generic netlink,
// internal/ipvs/dummy for rtnetlink) enter a namespace, so that a test or the
// lab can point either at a namespace without the process moving into it.
//
// Contract: Open does the only I/O (opening the namespace file and a socket in
// the namespace); the namespace file is closed before it returns. Errors name
// the namespace and wrap the cause with %w.
package nlhandle
