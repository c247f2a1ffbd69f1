/* Reports what it can see: its PID, the processes, the network interfaces, open fds. Exit 0 only
 * if it sees a fresh PID namespace, loopback alone (and up), and nothing but fds 0-2. */
#include <dirent.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

int main(void) {
    int procs = 0, fds = 0, ifaces = 0, bad = 0;
    DIR *d = opendir("/proc");
    for (struct dirent *e; d && (e = readdir(d));)
        procs += e->d_name[0] >= '1' && e->d_name[0] <= '9';
    if (d)
        closedir(d);
    d = opendir("/proc/self/fd");
    for (struct dirent *e; d && (e = readdir(d));)
        fds += atoi(e->d_name) > 2 && atoi(e->d_name) != dirfd(d);
    if (d)
        closedir(d);
    struct if_nameindex *ifs = if_nameindex();
    for (struct if_nameindex *i = ifs; i && i->if_index; i++) {
        ifaces++;
        printf("iface %s\n", i->if_name);
        bad |= strcmp(i->if_name, "lo") != 0;
    }
    if (ifs)
        if_freenameindex(ifs);
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    strcpy(ifr.ifr_name, "lo");
    int lo_up = s >= 0 && ioctl(s, SIOCGIFFLAGS, &ifr) == 0 && (ifr.ifr_flags & IFF_UP);
    printf("pid=%d procs=%d extra_fds=%d ifaces=%d lo_up=%d uid=%d\n", (int)getpid(), procs, fds,
           ifaces, lo_up, (int)getuid());
    bad |= getpid() > 3 || procs > 3 || fds > 0 || !lo_up;
    return bad;
}
