// Package netfilter writes the firewall of a sandbox's link (one nftables
// table per sandbox in the uplink namespace) and holds the address plan
// of the links and the ranges no sandbox reaches. The firewall is Linux's
// (netfilter_linux.go); the ranges are checked on every platform, where
// allow lists are validated.
package netfilter
