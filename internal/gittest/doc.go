// Package gittest serves throwaway git repositories over https for tests:
// `git http-backend` behind net/http/cgi and an httptest TLS server, so the
// runner clones and pushes through the same https path as in production
// (task-requests only accept https and ssh URLs) without any network.
package gittest
