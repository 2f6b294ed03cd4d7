# levee/postgres: PostgreSQL 15 FROM scratch, from the host's Debian
# binaries, for the compose profile postgres, where nothing can be pulled.
# scripts/postgres-image.sh fills the build context (.images/postgres/:
# rootfs/ with the programs, their libraries, /bin/sh for initdb's popen,
# /entrypoint and /etc/passwd; owned/ with the directories postgres (999)
# writes) and builds it with the classic builder. The entrypoint takes the
# official postgres image's variables (POSTGRES_PASSWORD[_FILE],
# POSTGRES_USER, POSTGRES_DB, PGDATA).
FROM scratch
COPY rootfs/ /
COPY --chown=999:999 owned/ /
ENV PATH=/usr/lib/postgresql/15/bin \
    PGDATA=/var/lib/postgresql/data \
    TZ=UTC
USER 999:999
# Fast shutdown (the official image's choice): SIGTERM would wait for
# every client to disconnect.
STOPSIGNAL SIGINT
EXPOSE 5432
ENTRYPOINT ["/entrypoint"]
