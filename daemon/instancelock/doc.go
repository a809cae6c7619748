// Package instancelock makes a daemon instance name exclusive on one Docker
// engine. Daemons adopt containers by their instance label, so two daemons
// of one instance on one engine (another socket and data dir, the default
// instance name) would supervise the same swarms; the socket's flock cannot
// see that, since the two share no file.
//
// The lock is a marker container named aimid-instance-<instance>: the
// engine refuses a second container of one name, so creating it is an
// atomic test-and-set visible to every client of the engine, whatever its
// host, socket or data dir. The marker is created, never started, from a
// tiny empty image the package imports once (aimi-instance-lock:1), and its
// labels name the owner: pid, socket, data dir, host, start time, and what
// tells a live process from a gone one (boot id, pid namespace, the pid's
// start time, the engine container it runs in). A daemon that finds the
// marker of a gone owner removes it (by id, so a racing successor's marker
// is never hit) and takes the name. Gone means: a marker from an earlier
// boot with a local engine (the host rebooted); on this boot and pid
// namespace, a pid that is gone or belongs to a later process; in another
// pid namespace, an owner container that is gone, stopped, restarted since,
// or our own (an earlier run of it). An owner that cannot be checked (a
// remote engine's other hosts, another namespace outside a container)
// counts as live, and the refusal says how to remove the marker by hand.
// The owner removes its marker on a clean exit.
//
// Why not a volume or a network: creating a volume of an existing name
// returns the existing one, and the engine's duplicate check for network
// names is best effort (and a bridge network would take an address pool).
package instancelock
