package contract

// KeptRefPrefix is the namespace of the refs under which aimid keeps, in
// the user's checkout, commits it took out of a container that no branch
// of the checkout names yet (a remote-mode rerun or fetch whose push to
// origin failed). The full ref is KeptRef(sb). Work is
// received, and its container may go, once its tip is reachable from any
// ref of the checkout or the swarm's mirror: a ref under this prefix is
// one such (as publish's refs/aimi/unpublished/ of a refused publish), so
// the commits survive git gc until the user takes them and deletes the
// ref (git update-ref -d).
const KeptRefPrefix = "refs/aimi/kept/"

// KeptRef is the keep ref of container sb:
// refs/aimi/kept/<swarm id>/<container name>. Both parts are valid ref
// components (a UUID; an engine container name).
func KeptRef(sb Sandbox) string {
	return KeptRefPrefix + sb.Swarm + "/" + sb.Container
}
