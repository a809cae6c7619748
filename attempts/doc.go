// Package attempts holds the rules of "best of N": a task file run N
// times, each run (an attempt) in a container and on a branch of its own,
// and one of them picked. It names the attempts' containers and branches
// (Name, Branch), chooses the agent variant of each (VariantIndex), and
// orders the finished attempts (Pick): an attempt qualifies when every
// story completed and the verify command passed on its last commit; among
// those the higher score wins, then fewer changed lines, then lower cost,
// then the earlier finish. It makes no engine, git or file call.
package attempts
