/* A stand-in for `sudo -n COMMAND...` on a machine that has no sudo (this one, CI, act): run
 * COMMAND as root with the environment sudo's default `env_reset` leaves (a secure PATH and
 * nothing else). Installed setuid-root by a test, in a folder only the test's user can reach,
 * and removed with it: it lets a test run imm as an ordinary user with passwordless sudo, as
 * on GitHub's hosted runners. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int first = 1;
    if (first < argc && strcmp(argv[first], "-n") == 0) first++;
    if (first >= argc) return 1;
    if (setgid(0) != 0 || setuid(0) != 0) {
        perror("sudo stand-in");
        return 1;
    }
    char *env[] = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", NULL};
    execvpe(argv[first], argv + first, env);
    perror("sudo stand-in");
    return 127;
}
