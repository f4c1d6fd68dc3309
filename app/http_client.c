/* app/http_client.c — the HTTP/1.1 client of `nibble agent` (see http_client.h). */
#include "app/http_client.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define HTTP_MAX_ANSWER (64u << 20)

/* "http://host:port/prefix" -> host, port, prefix (without a trailing '/'). */
static int split_url(const char *url, char *host, size_t hcap, char *port, size_t pcap,
                     char *prefix, size_t xcap)
{
    if (strncmp(url, "http://", 7)) return -1;
    const char *h = url + 7, *slash = strchr(h, '/');
    size_t hl = slash ? (size_t)(slash - h) : strlen(h);
    const char *colon = memchr(h, ':', hl);
    if (h[0] == '[') colon = NULL; /* [::1]:port: find the colon after ']' */
    const char *rb = h[0] == '[' ? memchr(h, ']', hl) : NULL;
    if (rb) colon = rb + 1 < h + hl && rb[1] == ':' ? rb + 1 : NULL;
    size_t nl = colon ? (size_t)(colon - h) : hl;
    const char *hs = h;
    if (rb) hs = h + 1, nl = (size_t)(rb - h - 1);
    if (nl == 0 || nl >= hcap) return -1;
    memcpy(host, hs, nl);
    host[nl] = '\0';
    size_t pl = colon ? (size_t)(h + hl - colon - 1) : 2;
    if (pl == 0 || pl >= pcap) return -1;
    if (colon) memcpy(port, colon + 1, pl), port[pl] = '\0';
    else snprintf(port, pcap, "80");
    snprintf(prefix, xcap, "%s", slash ? slash : "");
    size_t xl = strlen(prefix);
    while (xl && prefix[xl - 1] == '/') prefix[--xl] = '\0';
    return 0;
}

static int send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Decode a chunked body in place; its length, or -1 if malformed. */
static long unchunk(char *b, size_t n)
{
    size_t r = 0, w = 0;
    for (;;) {
        char *end;
        if (r >= n) return -1;
        unsigned long sz = strtoul(b + r, &end, 16);
        char *crlf = strstr(b + r, "\r\n");
        if (end == b + r || !crlf) return -1;
        r = (size_t)(crlf - b) + 2;
        if (sz == 0) break;
        if (sz > n - r) return -1;
        memmove(b + w, b + r, sz);
        w += sz;
        r += sz + 2;
    }
    b[w] = '\0';
    return (long)w;
}

int app_http(const char *url, const char *method, const char *path, const char *body,
             const char *api_key, double timeout_s, struct app_http_answer *ans, char *err,
             size_t errcap)
{
    char host[256], port[16], prefix[512];
    struct addrinfo hints = {0}, *res = NULL;
    int fd = -1, rc = -1;
    char *req = NULL, *buf = NULL;
    memset(ans, 0, sizeof *ans);
    if (split_url(url, host, sizeof host, port, sizeof port, prefix, sizeof prefix)) {
        snprintf(err, errcap, "%s: not an http://HOST[:PORT][/PREFIX] URL", url);
        return -1;
    }
    size_t xl = strlen(prefix);
    if (xl >= 3 && !strcmp(prefix + xl - 3, "/v1") && !strncmp(path, "/v1/", 4)) path += 3;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int gai = getaddrinfo(host, port, &hints, &res);
    if (gai) {
        snprintf(err, errcap, "%s: %s", url, gai_strerror(gai));
        goto fail;
    }
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd < 0) continue;
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
        close(fd);
        fd = -1;
    }
    if (fd < 0) {
        snprintf(err, errcap, "%s: cannot connect: %s", url, strerror(errno));
        goto fail;
    }
    struct timeval tv = {(time_t)timeout_s, (suseconds_t)((timeout_s - (double)(time_t)timeout_s) * 1e6)};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    size_t blen = body ? strlen(body) : 0, cap = blen + strlen(prefix) + strlen(path) + 1024;
    if (!(req = malloc(cap))) {
        snprintf(err, errcap, "out of memory");
        goto fail;
    }
    char auth[600] = "";
    if (api_key && api_key[0]) snprintf(auth, sizeof auth, "Authorization: Bearer %.500s\r\n", api_key);
    int hl = snprintf(req, cap,
                      "%s %s%s HTTP/1.1\r\nHost: %s:%s\r\nConnection: close\r\n"
                      "Accept: application/json\r\n%s%s%zu\r\n\r\n",
                      method, prefix, path, host, port, auth,
                      body ? "Content-Type: application/json\r\nContent-Length: " : "Content-Length: ",
                      blen);
    if (hl < 0 || (size_t)hl >= cap || send_all(fd, req, (size_t)hl) || (blen && send_all(fd, body, blen))) {
        snprintf(err, errcap, "%s: cannot send the request: %s", url, strerror(errno));
        goto fail;
    }
    size_t n = 0, bcap = 65536;
    if (!(buf = malloc(bcap + 1))) {
        snprintf(err, errcap, "out of memory");
        goto fail;
    }
    for (;;) {
        if (n == bcap) {
            char *nb2 = bcap * 2 > HTTP_MAX_ANSWER ? NULL : realloc(buf, bcap * 2 + 1);
            if (!nb2) {
                snprintf(err, errcap, "%s: the answer is larger than %u bytes", url, HTTP_MAX_ANSWER);
                goto fail;
            }
            buf = nb2;
            bcap *= 2;
        }
        ssize_t r = recv(fd, buf + n, bcap - n, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            snprintf(err, errcap, "%s: no answer (%s)", url,
                     errno == EAGAIN || errno == EWOULDBLOCK ? "timed out" : strerror(errno));
            goto fail;
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    buf[n] = '\0';
    char *hend = strstr(buf, "\r\n\r\n");
    int status = 0;
    if (!hend || sscanf(buf, "HTTP/1.%*d %d", &status) != 1) {
        snprintf(err, errcap, "%s: not an HTTP answer", url);
        goto fail;
    }
    *hend = '\0';
    int chunked = 0;
    for (char *line = strstr(buf, "\r\n"); line; line = strstr(line + 2, "\r\n"))
        if (!strncasecmp(line + 2, "transfer-encoding:", 18) && strstr(line + 20, "chunked")) chunked = 1;
    char *b = hend + 4;
    size_t len = n - (size_t)(b - buf);
    memmove(buf, b, len + 1);
    if (chunked) {
        long ul = unchunk(buf, len);
        if (ul < 0) {
            snprintf(err, errcap, "%s: a malformed chunked answer", url);
            goto fail;
        }
        len = (size_t)ul;
    }
    ans->status = status;
    ans->body = buf;
    ans->len = len;
    buf = NULL;
    rc = 0;
fail:
    if (fd >= 0) close(fd);
    if (res) freeaddrinfo(res);
    free(req);
    free(buf);
    return rc;
}
