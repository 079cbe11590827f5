// Package ipvs is kproxy's boundary to the kernel's IP Virtual Server table (the
// ipvs mode): value types for virtual and real servers, and Interface, which the
// ipvs proxier programs and a fake implements in tests.
package ipvs
