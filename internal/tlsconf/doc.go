// Package tlsconf is Levee's TLS: the gate's public (edge) configuration,
// and the cluster's mutual TLS between the tiers, with certificates that
// are re-read from their files when they change so that a renewal needs no
// restart.
//
// # Reloading
//
// A KeyPair (certificate and key files) and a CAPool (a PEM bundle) look
// at their files' modification time and size at most once per second, and
// only when a handshake needs them. When a file changed it is read and
// parsed again; a new file that does not parse (a half-written renewal, a
// certificate whose key has not been written yet) keeps the old pair in
// service, is logged once, and is tried again when the file changes again.
// Connections already open are never touched: a renewal changes what new
// handshakes see.
//
// # Cluster identities
//
// A tier's certificate names its role in a URI SAN, spiffe://levee/<role>
// (RoleGate, RoleLogic, RoleBattle, RoleOps); DNS SANs may name the
// service as well, but the role is what is checked. A Cluster is the
// cluster CA plus the tier's own key pair. Its ServerConfig accepts only
// clients whose certificate chains to the cluster CA, is valid now, and
// carries one of the accepted roles; its ClientConfig accepts only a
// server with the expected role. A refusal is one of ErrNoCertificate,
// ErrExpired, ErrUnknownAuthority, ErrWrongRole (Reason names it for logs
// and metrics), logged at WARN and counted (Cluster.Refusals).
package tlsconf
