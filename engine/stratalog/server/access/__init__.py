"""Who may use an engine: authentication, authorization and TLS for both listeners.

    model          principals, the four verbs, the authenticator/authorizer interfaces and
                   ``AccessControl``, which the HTTP and Kafka listeners both call
    permissions    what each HTTP route and each Kafka API needs (pure tables)
    static_tokens  a token file for ``stratalog serve`` outside Kubernetes
    tls            the server's TLS context, reloaded when its certificate files change
    http           the aiohttp middleware

The engine knows no Kubernetes: the agent brings an authenticator (TokenReview) and an
authorizer (SubjectAccessReview) that implement ``model``'s interfaces.
"""
