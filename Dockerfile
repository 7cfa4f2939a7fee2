# Builds the api and wxsim binaries into a small image. Used by
# docker-compose.yml; `make run` needs no Docker.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/api ./cmd/api && \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/wxsim ./cmd/wxsim

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/api /out/wxsim /usr/local/bin/
USER nonroot
EXPOSE 8080 8090
ENTRYPOINT ["/usr/local/bin/api"]
CMD ["serve"]
