// Package account is who a request runs as: the parser and editor of the
// guest's account files (passwd, group, shadow, gshadow), the switch of a
// dedicated OS thread to a user's file-system credentials (RunAs), the
// signalling of a user's processes (KillAs), and each agent's private /tmp
// mount namespace.
//
// Its init locks the main goroutine to the main thread, so credential
// switches never happen on the thread the process started on.
//
// The account-file parser is portable and its tests need no root.
package account
