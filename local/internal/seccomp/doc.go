// Package seccomp builds and loads the system call filter of a sandbox's
// commands (seccomp(2)): a deny list modelled on Docker's default profile,
// refusing kernel keyrings, bpf, io_uring, module loading, clock changes
// and, unless allowed, mounting and new namespaces, behind a guard that
// refuses every call of another architecture (32-bit calls). The filter
// is installed on the calling OS thread only, and inherited by what it
// forks. It is Linux's: on other systems the package is empty.
package seccomp
