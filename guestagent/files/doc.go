// Package files is the guest agent's file operations (read, write, stat,
// list, mkdir, remove, move). Each runs on an OS thread switched to the
// credentials of the user the request names, beneath the request's root
// through os.Root when it has one, so the kernel enforces permissions and
// confinement.
//
// Path handling and line scanning are plain functions tested without root;
// the operations themselves need root to switch credentials.
package files
