#define _GNU_SOURCE
#include "pk_common.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Reads fd to its end (at most max_bytes when non-zero) and closes it. */
static int read_fd(int fd, const char *path, size_t max_bytes, char **out, size_t *out_len,
                   pk_error *err) {
    pk_strbuf sb = {0};
    char buf[65536];
    int rc = PK_OK;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = pk_error_errno(err, PK_ERR_IO, "read %s", path);
            break;
        }
        if (n == 0)
            break;
        if (max_bytes && sb.len + (size_t)n > max_bytes) {
            rc = pk_error_set(err, PK_ERR_INVALID, "%s: larger than %zu bytes", path, max_bytes);
            break;
        }
        if (pk_strbuf_append(&sb, buf, (size_t)n)) {
            rc = pk_error_set(err, PK_ERR_NOMEM, "out of memory reading %s", path);
            break;
        }
    }
    close(fd);
    if (rc) {
        pk_strbuf_free(&sb);
        return rc;
    }
    if (out_len)
        *out_len = sb.len;
    *out = pk_strbuf_take(&sb);
    return PK_OK;
}

int pk_read_file(const char *path, char **out, size_t *out_len, pk_error *err) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return pk_error_errno(err, errno == ENOENT ? PK_ERR_NOT_FOUND : PK_ERR_IO, "open %s", path);
    return read_fd(fd, path, 0, out, out_len, err);
}

int pk_read_file_untrusted(const char *path, size_t max_bytes, char **out, size_t *out_len,
                           pk_error *err) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return pk_error_errno(err, errno == ENOENT ? PK_ERR_NOT_FOUND : PK_ERR_IO, "open %s", path);
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return pk_error_set(err, PK_ERR_INVALID, "%s is not a regular file", path);
    }
    return read_fd(fd, path, max_bytes, out, out_len, err);
}

static int write_file_mode(const char *path, const void *data, size_t len, mode_t mode,
                           pk_error *err) {
    int priv = mode == 0600;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | (priv ? O_NOFOLLOW : 0), mode);
    if (fd < 0)
        return pk_error_errno(err, PK_ERR_IO, "create %s", path);
    /* O_CREAT's mode does not apply to a file that already existed. */
    if (priv && fchmod(fd, mode) != 0) {
        int rc = pk_error_errno(err, PK_ERR_IO, "chmod %s", path);
        close(fd);
        return rc;
    }
    const char *p = data;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            int rc = pk_error_errno(err, PK_ERR_IO, "write %s", path);
            close(fd);
            return rc;
        }
        p += n;
        len -= (size_t)n;
    }
    if (close(fd))
        return pk_error_errno(err, PK_ERR_IO, "close %s", path);
    return PK_OK;
}

int pk_write_file(const char *path, const void *data, size_t len, pk_error *err) {
    return write_file_mode(path, data, len, 0644, err);
}

int pk_write_file_private(const char *path, const void *data, size_t len, pk_error *err) {
    return write_file_mode(path, data, len, 0600, err);
}

int pk_mkdir_p(const char *path, pk_error *err) {
    char *tmp = strdup(path);
    if (!tmp)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0755) && errno != EEXIST) {
            int rc = pk_error_errno(err, PK_ERR_IO, "mkdir %s", tmp);
            free(tmp);
            return rc;
        }
        *p = '/';
    }
    int rc = PK_OK;
    if (mkdir(tmp, 0755) && errno != EEXIST)
        rc = pk_error_errno(err, PK_ERR_IO, "mkdir %s", tmp);
    free(tmp);
    return rc;
}

int pk_mkdir_private(const char *path, int *tightened, pk_error *err) {
    if (tightened)
        *tightened = 0;
    char *parent = strdup(path);
    if (!parent)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    char *slash = strrchr(parent, '/');
    while (slash && slash > parent && slash[1] == '\0') { /* trailing slashes */
        *slash = '\0';
        slash = strrchr(parent, '/');
    }
    int rc = PK_OK;
    if (slash && slash != parent) {
        *slash = '\0';
        rc = pk_mkdir_p(parent, err);
    }
    free(parent);
    if (rc)
        return rc;
    if (mkdir(path, 0700) == 0)
        return PK_OK;
    if (errno != EEXIST)
        return pk_error_errno(err, PK_ERR_IO, "mkdir %s", path);
    struct stat st;
    if (stat(path, &st) != 0)
        return pk_error_errno(err, PK_ERR_IO, "stat %s", path);
    if (!S_ISDIR(st.st_mode))
        return pk_error_set(err, PK_ERR_IO, "%s exists and is not a directory", path);
    /* Its owner could swap what we put there, whatever the mode says. */
    if (st.st_uid != geteuid())
        return pk_error_set(err, PK_ERR_IO, "%s is owned by uid %d, not by us: refusing to use it",
                            path, (int)st.st_uid);
    if ((st.st_mode & 077) == 0)
        return PK_OK;
    if (chmod(path, 0700) != 0)
        return pk_error_errno(err, PK_ERR_IO, "chmod 0700 %s", path);
    if (tightened)
        *tightened = 1;
    return PK_OK;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path) ? -1 : 0;
}

int pk_rm_rf(const char *path) {
    if (!pk_path_exists(path))
        return PK_OK;
    return nftw(path, rm_one, 32, FTW_DEPTH | FTW_PHYS) ? PK_ERR_IO : PK_OK;
}

int pk_path_exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

char *pk_path_join(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    char *s = malloc(la + lb + 2);
    if (!s)
        return NULL;
    memcpy(s, a, la);
    size_t k = la;
    if (k && s[k - 1] != '/')
        s[k++] = '/';
    memcpy(s + k, b, lb + 1);
    return s;
}
