"""Parley's settings: every knob is an environment variable (or a line in an optional `.env`)."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, SecretStr, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from addressing import MIN_NAME_CHARS
from archive import DatabaseUrlError, check_database_url, is_postgres_url
from limits import RoleLimit, parse_role_limits

ChannelMode = Literal["mention-only", "normal", "chatty"]
VisionMode = Literal["auto", "on", "off"]
JudgeOutputMode = Literal["tool", "native", "prompted"]
WebSearchMode = Literal["off", "native", "duckduckgo", "tavily"]
# What each answer shows under it of what it cost: nothing, its tokens, or its tokens and estimated cost.
FooterMode = Literal["off", "tokens", "cost"]
# IMAGE_MODEL's word for the answer model's own image tool, where its provider has one.
NATIVE_IMAGES = "native"

# A Discord id (a snowflake) is an unsigned 64-bit number, and every id Discord has made (since 2015) has 17 digits
# at least: a shorter number is a cut-off paste or no id at all, and would silently match nothing.
# https://discord.com/developers/docs/reference#snowflakes
SNOWFLAKE_MIN, SNOWFLAKE_LIMIT = 10**16, 2**64
WHAT_AN_ID_IS = "a Discord id is 17 to 20 digits (turn on Developer Mode in Discord, then right-click > Copy ID)"

# The bot token travels to DISCORD_API_BASE_URL and DISCORD_GATEWAY_URL: only over TLS, or to this machine.
_SECURE_SCHEMES = {"discord_api_base_url": ("https", "http"), "discord_gateway_url": ("wss", "ws")}


class Settings(BaseSettings):
    """Parley's configuration, read from the environment and an optional `.env` file."""

    model_config = SettingsConfigDict(env_file=".env", env_file_encoding="utf-8", extra="ignore")

    discord_token: SecretStr = Field(description="Bot token from the Discord developer portal.")

    llm_model: str = Field(
        "openai:gpt-4.1-mini",
        description="pydantic-ai model string; with LLM_BASE_URL set, the model's name on that server, verbatim.",
    )
    llm_base_url: str | None = Field(None, description="Any OpenAI-compatible chat-completions server.")
    llm_api_key: SecretStr | None = Field(None, description="Key for LLM_BASE_URL's server.")
    models: Annotated[frozenset[str], NoDecode] = Field(
        frozenset(),
        description="Models a profile may choose for a channel, comma-separated model strings;"
        " LLM_MODEL and JUDGE_MODEL are always allowed.",
    )
    member_models: Annotated[frozenset[str], NoDecode] = Field(
        frozenset(),
        description="Models members may choose for the answers to them (/parley model), comma-separated model"
        " strings; the channel's profile model is the default choice; unset: members choose none.",
    )
    profiles_file: Path | None = Field(
        None, description="TOML file of server and channel profiles; the /parley-admin profile commands override it."
    )

    conversation_timeout_seconds: float = Field(120, gt=0, description="Inactivity that ends a conversation.")
    followup_window_seconds: float = Field(
        120, ge=0, description="How long after the bot speaks a message can be a follow-up."
    )
    max_conversation_messages: int = Field(
        500, ge=1, description="Messages a conversation keeps in memory; older ones live in the archive."
    )
    context_message_count: int = Field(
        20, ge=0, description="Recent channel messages loaded when a conversation starts."
    )
    context_max_age_minutes: float = Field(60, ge=0, description="Oldest message loaded when a conversation starts.")

    use_llm_judge: bool = Field(False, description="Ask an LLM judge about ambiguous messages.")
    judge_model: str | None = Field(None, description="Model for the judge; defaults to LLM_MODEL.")
    judge_timeout_seconds: float = Field(5, gt=0, description="A judge slower than this means no answer.")
    judge_output: JudgeOutputMode = Field(
        "tool",
        description="How the judge returns its verdict: a tool call, the server's JSON-schema output, or JSON"
        " asked for in the prompt (works with any model).",
    )

    decider_model: str = Field(
        "decider_model.json",
        min_length=1,
        description="The learned follow-up tier's model (eval/train_decider.py writes it); a relative path is read from"
        " Parley's folder. A missing or unreadable file stops the start.",
    )

    judge_calls_per_minute: int = Field(
        6, ge=0, description="Judge calls a channel may make a minute (in bursts of as many); 0: no limit."
    )

    member_answers_per_hour: float = Field(
        30, ge=0, description="Answers a member may get an hour in a server, after the burst; 0: no limit."
    )
    member_answer_burst: int = Field(5, ge=1, description="Answers a member may get in quick succession.")
    role_limits: Annotated[frozenset[RoleLimit], NoDecode] = Field(
        frozenset(),
        description="Limits by role, in place of the member defaults: role_id:answers_per_hour:tokens_per_day,"
        " comma-separated (0: no limit); a member with several of these roles gets the most generous of each.",
    )
    channel_queue_limit: int = Field(
        5,
        ge=1,
        description="Members' mentions that may wait in a channel while Parley answers; later ones are not answered.",
    )
    max_concurrent_answers: int = Field(8, ge=1, description="Answers in progress at once across all channels.")

    response_timeout_seconds: float = Field(90, gt=0, description="Time limit for one answer, tools included.")
    model_retries: int = Field(3, ge=0, description="Retries of a transient provider error (429, 5xx, timeout).")
    max_model_requests: int = Field(8, ge=1, description="Model requests one answer may make (tool rounds).")
    max_answer_posts: int = Field(
        4,
        ge=1,
        description='Messages one answer may take; a longer answer is cut, its last message ending "(answer cut)".',
    )
    answer_delivery_seconds: float = Field(
        30,
        gt=0,
        le=600,
        description="How long posting an answer is retried while Discord fails (5xx, timeouts) before the member "
        "is told it was lost (one line, posted once Discord takes posts again).",
    )
    answer_footer: FooterMode = Field(
        "off",
        description="What each answer shows under it of what it spent: off, tokens, or cost (its tokens and"
        " estimated cost); a server or channel profile's `footer` overrides it.",
    )
    stream_answers: bool = Field(
        True,
        description="Post an answer once its first sentence is written and edit it as it grows, with a Stop button.",
    )
    stream_edit_seconds: float = Field(
        1.0, ge=0.2, le=60, description="Shortest time between two edits of a streamed answer in a channel."
    )
    history_token_budget: int = Field(
        12000, ge=500, description="Approximate tokens of conversation history sent to the model."
    )
    summarize_history: bool = Field(
        True,
        description="Replace a long history's oldest turns by a model-written summary instead of cutting them,"
        " and start a conversation with summaries of the channel's last ones (these need the archive).",
    )
    summary_model: str | None = Field(None, description="Model that writes the summaries; defaults to JUDGE_MODEL.")
    summary_context_tokens: int = Field(
        1000,
        ge=0,
        description="Approximate tokens of earlier conversations' summaries (the last 3 at most) a new conversation"
        " starts with; 0: none.",
    )
    max_answer_tokens: int = Field(
        1000, ge=16, description="Most tokens the model may write in one response (its max_tokens)."
    )
    answer_input_tokens_limit: int = Field(
        60000,
        ge=1000,
        description="Input tokens one answer may use across all its model requests, tool rounds included.",
    )
    answer_output_tokens_limit: int = Field(
        4000, ge=16, description="Output tokens one answer may use across all its model requests, tool rounds included."
    )
    # On by default: a bot anyone can invite would otherwise spend without bound. 3,000,000 is a busy server's day,
    # 300 answers of ~10,000 tokens each (bench/bench_cost.py: 8,224 to 12,409 input tokens an answer from the 50th
    # of a long conversation on, at the default HISTORY_TOKEN_BUDGET).
    server_tokens_per_day: int = Field(
        3_000_000,
        ge=0,
        description="Tokens (input and output) Parley may use per server per UTC day (the default covers about 300"
        " answers); 0 means no limit.",
    )

    database_url: str = Field(
        "sqlite:///data/parley.db",
        description="The archive: sqlite:///path.db (one process) or postgresql://user:password@host:port/db"
        " (several processes, shards); empty turns it and its tools off.",
    )
    history_retention_days: int = Field(90, ge=0, description="Archive retention; 0 keeps everything.")
    archive_lock_wait_seconds: float = Field(
        15,
        ge=0,
        description="How long a start waits for another process serving from the same archive (or shard) to stop,"
        " as a redeploy's old one does, before it gives up with exit 2; 0 gives up at once.",
    )
    archive_file_text_channel_bytes: int = Field(
        4_000_000,
        ge=0,
        description="Bytes of text read from files (text files, PDFs, transcripts) the archive keeps per channel per"
        " UTC day; past it a file's text is not kept (its name is); 0 means no limit.",
    )
    archive_file_text_member_bytes: int = Field(
        1_000_000,
        ge=0,
        description="Bytes of text read from one member's files the archive keeps per UTC day, all channels together;"
        " 0 means no limit.",
    )
    embedding_model: str | None = Field(
        None,
        description="pydantic-ai embedding model string (e.g. openai:text-embedding-3-small) for the knowledge base's"
        " vector search beside full text; empty: the local model WordLlama, on the CPU, no key needed.",
    )
    embedding_timeout_seconds: float = Field(
        10, gt=0, description="Time limit for one embedding request (a batch of sections, or a search's question)."
    )
    backfill_max_messages: int = Field(
        1000,
        ge=0,
        description="Messages catch-up fetches per channel after downtime (newest first); 0 turns catch-up off.",
    )
    backfill_concurrency: int = Field(2, ge=1, le=16, description="Channels caught up at once.")
    gap_answer_minutes: int = Field(
        10,
        ge=0,
        le=24 * 60,
        description="A mention, reply or follow-up catch-up finds from while Parley was away is answered if it is at"
        " most this many minutes old (older ones are logged and left); 0 answers none.",
    )
    reconcile_page_pause_seconds: float = Field(
        1.0,
        ge=0,
        le=60,
        description="Pause between two history pages of 100 while the archive is rechecked against Discord after"
        " downtime (deletions and edits made meanwhile); it keeps the recheck's requests few beside answers'.",
    )
    history_tools: bool = Field(
        True, description="Offer the model the archive's search, recent-messages and stats tools (needs tool calling)."
    )
    memory_tools: bool = Field(
        True,
        description="Offer the model the remember and recall tools, which keep facts in the archive"
        " (needs it, and HISTORY_TOOLS).",
    )
    server_actions: bool = Field(
        False,
        description="Offer the model the server actions (pin, unpin, thread, slowmode, delete, timeout) where a"
        " channel's profile offers `server_actions`: each waits for the asker's Approve and runs only if they hold its"
        " permission (needs the archive, which keeps their audit log, and HISTORY_TOOLS).",
    )
    knowledge_max_documents: int = Field(
        100,
        ge=0,
        description="Documents an admin may add to a server's knowledge base (/parley-admin knowledge add); pinned"
        " messages are not counted; 0 means no limit.",
    )
    knowledge_answer_threshold: float = Field(
        0.74,
        ge=0,
        description="How sure the knowledge search must be that the documents answer a question before Parley"
        " answers one nobody addressed; higher: fewer wrong answers and more unanswered questions.",
    )
    support_wait_seconds: float = Field(
        120,
        ge=0,
        le=24 * 60 * 60,
        description="In a support channel (/parley-admin support), how long Parley waits for a member to answer a"
        " question nobody addressed before it answers from the documents.",
    )
    support_handoff_minutes: float = Field(
        60,
        gt=0,
        le=7 * 24 * 60,
        description="In a support forum, how long after a post nobody answered and the documents don't answer"
        " Parley pings SUPPORT_STAFF_ROLE, once.",
    )
    support_staff_role: int | None = Field(
        None,
        description="Id of the role a support forum's unanswered posts are handed to (its one ping); unset: no"
        " hand-off line.",
    )

    vision: VisionMode = Field(
        "auto",
        description="Send members' images to the model: `auto` (when the model's profile says it takes images, until"
        " its provider refuses one), `on` or `off`.",
    )
    max_images: int = Field(4, ge=0, le=20, description="Images one request may carry, newest first; 0: none.")
    image_retain_turns: int = Field(
        3, ge=1, description="Turns an image stays in the model's history before it becomes a one-line placeholder."
    )
    max_attachment_chars: int = Field(
        100_000, ge=0, description="Characters of text files, PDFs and transcripts one request may carry, newest first."
    )
    transcription_model: str | None = Field(
        None,
        description="An audio transcription model on LLM_BASE_URL's server (or OpenAI's) that turns voice notes into"
        " text; unset: the model is told a voice note was there.",
    )
    mcp_servers: str | None = Field(
        None,
        description="JSON file of MCP servers whose tools Parley offers, in the common mcpServers format"
        " (stdio: command, args, env; streamable HTTP: url, headers).",
    )
    mcp_tool_timeout_seconds: float = Field(
        30, gt=0, description="Longest an MCP tool call may take; a slower one is stopped and the model told so."
    )
    approval_timeout_seconds: float = Field(
        120,
        gt=0,
        le=900,
        description="How long a tool call that needs the asker's approval waits for their Approve or Deny; no answer"
        " in time denies it (the answer lets go of its answer slot and its channel's turn meanwhile).",
    )
    tavily_api_key: SecretStr | None = Field(None, description="Tavily's API key, for WEB_SEARCH=tavily.")
    web_search: WebSearchMode = Field(
        "off",
        description="Web search for the model: off, native (the provider's own search tool), duckduckgo or"
        " tavily (searched by Parley).",
    )
    web_search_max_calls: int = Field(2, ge=1, description="Web searches one answer may make.")
    image_model: str | None = Field(
        None,
        description="Images the model may make and edit: a direct image model (openai:gpt-image-1, google:…,"
        " xai:…; openai's on LLM_BASE_URL's server when it is set), or native (the answer model's own image tool);"
        " unset: no images.",
    )
    images_per_member_per_day: int = Field(
        10, ge=0, description="Images one member may have made in a server each UTC day; 0: none."
    )
    images_per_server_per_day: int = Field(
        100, ge=0, description="Images made in one server each UTC day, every member's together; 0: none."
    )
    links: bool = Field(
        False,
        description="Let the model read the links members give (the read_link tool): a link in the message it"
        " answers, the one that message replies to, or the conversation's recent messages; a channel's profile may"
        " withhold it.",
    )
    links_allowed_domains: Annotated[frozenset[str], NoDecode] = Field(
        frozenset(),
        description="Host names whose pages read_link may read, comma-separated (exact names: list www.example.com"
        " and example.com both); none: any not blocked. Checked on every redirect.",
    )
    links_blocked_domains: Annotated[frozenset[str], NoDecode] = Field(
        frozenset(),
        description="Host names whose pages read_link never reads, comma-separated (exact names); wins over"
        " LINKS_ALLOWED_DOMAINS. Checked on every redirect.",
    )
    links_max_chars: int = Field(
        12_000, ge=500, le=100_000, description="Characters of a linked page's text the model is given; the rest cut."
    )
    links_max_bytes: int = Field(
        10 * 2**20,
        ge=1024,
        le=50 * 2**20,
        description="Bytes of a linked page Parley downloads at most (streamed: a longer body is dropped at the cap).",
    )
    links_timeout_seconds: float = Field(
        15, gt=0, le=120, description="Longest one link's download may take, redirects and a slow body included."
    )
    links_allow_private_addresses: bool = Field(
        False,
        description="Let read_link reach private, loopback and link-local addresses (tests use it to reach a local"
        " server); never set it in a deployment: a member's link could reach this machine's network.",
    )

    discord_api_base_url: str | None = Field(
        None, description="REST proxy, e.g. a local fake in tests: https://, or http:// to a loopback address only."
    )
    discord_gateway_url: str | None = Field(
        None, description="Gateway proxy, e.g. a local fake in tests: wss://, or ws:// to a loopback address only."
    )
    answer_bot_ids: Annotated[frozenset[int], NoDecode] = Field(
        frozenset(),
        description="Ids of other bots and webhooks whose @mentions and replies Parley answers, comma-separated;"
        " any other bot, webhook or system message never makes it answer.",
    )
    allowed_servers: Annotated[frozenset[int], NoDecode] = Field(
        frozenset(),
        description="Ids of the servers Parley may serve, comma-separated: it leaves any other it is added to and"
        " answers nothing there; none: every server it is added to.",
    )
    allowed_channels: Annotated[frozenset[int], NoDecode] = Field(
        frozenset(),
        description="Ids of the channels or categories where Parley answers, comma-separated (a thread follows its"
        " channel); none: every channel it can read. A blocked channel stays blocked.",
    )
    blocked_channels: Annotated[frozenset[int], NoDecode] = Field(
        frozenset(),
        description="Ids of channels or categories where Parley never answers, comma-separated; wins over"
        " ALLOWED_CHANNELS.",
    )
    allowed_roles: Annotated[frozenset[int], NoDecode] = Field(
        frozenset(),
        description="Ids of the roles whose members may use Parley, comma-separated; none: every member."
        " A blocked role or member stays blocked.",
    )
    blocked_roles: Annotated[frozenset[int], NoDecode] = Field(
        frozenset(),
        description="Ids of roles whose members may not use Parley, comma-separated; wins over ALLOWED_ROLES.",
    )
    blocked_members: Annotated[frozenset[int], NoDecode] = Field(
        frozenset(), description="Ids of members who may not use Parley, comma-separated."
    )
    max_bot_exchanges: int = Field(
        3,
        ge=1,
        description="Answers to allow-listed bots in a channel without a human message in between (a loop guard).",
    )
    wake_words: Annotated[frozenset[str], NoDecode] = Field(
        frozenset(),
        description='Names Parley also answers to when a message calls it by one ("hey jarvis, …"), comma-separated;'
        " its username, display name and server nickname always count. Mention-only channels ignore names.",
    )
    catchup_token_budget: int = Field(
        300_000,
        ge=5_000,
        description="Tokens one /parley catchup (or one channel digest) may spend at most (reading and writing); a"
        " longer range is summarised from its newest messages and says how many older ones it left out.",
    )
    timezone: str = Field(
        "UTC",
        description="IANA time zone (Europe/Paris) in which members' times are read and shown: reminders, digest"
        " hours.",
    )
    reminders_per_member: int = Field(
        25,
        ge=0,
        description="Reminders and timed posts (/remind, the remind tool) one member may have waiting in a server;"
        " 0: members may set none.",
    )
    reminders_per_server: int = Field(
        500, ge=0, description="Reminders and timed posts a server may have waiting, all its members together."
    )
    schedules_per_server: int = Field(
        10,
        ge=0,
        description="Scheduled prompts (`/parley-admin schedule`) a server may have; each runs the model at its times."
        " 0: none.",
    )
    direct_messages: bool = Field(
        False,
        description="Answer direct messages (`on`/`off`): every DM is for Parley, its tools and memory reach only"
        " that DM; off by default, since a DM has no moderators and every message costs a model call.",
    )
    reports_per_member_per_hour: int = Field(
        5,
        ge=0,
        description="Messages one member may report to a server's moderators (Report to moderators) in an hour;"
        " 0: reports are not taken.",
    )
    screening_tokens_per_day: int = Field(
        20_000,
        ge=0,
        description="Tokens a server's watch lists may spend screening new messages each UTC day; at the budget"
        " screening stops until midnight and answering goes on; 0: no screening.",
    )
    shard_count: int | None = Field(
        None,
        ge=1,
        description="Shards the whole bot runs as (Discord requires sharding from 2,500 servers on); unset:"
        " discord.py asks Discord for its recommended count and runs every shard in this process.",
    )
    shard_ids: Annotated[frozenset[int], NoDecode] = Field(
        frozenset(),
        description="The shards this process runs, comma-separated (e.g. 0,1), each below SHARD_COUNT; unset:"
        " all of them. Processes with different ids and one Postgres DATABASE_URL serve every server together.",
    )
    guild_id: int | None = Field(None, description="Guild for instant slash-command sync while developing.")

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO", description="Console log level.")
    logfire_token: SecretStr | None = Field(
        None, description="With it, logs, decisions and model runs (without message text) also go to Logfire."
    )
    logfire_include_content: bool = Field(
        False,
        description="Also send message text to Logfire: prompts, instructions, tool arguments and results, answers,"
        " and the author names and judge's words in Parley's own log records.",
    )

    @field_validator("discord_token")
    @classmethod
    def _token_not_blank(cls, value: SecretStr) -> SecretStr:
        if not value.get_secret_value().strip():
            raise ValueError("must not be empty")
        return value

    @field_validator("llm_model")
    @classmethod
    def _model_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value.strip()

    @field_validator("database_url")
    @classmethod
    def _archive_url(cls, value: str) -> str:
        value = value.strip()
        if value and not value.startswith("sqlite:///") and not is_postgres_url(value):
            raise ValueError(
                "must look like sqlite:///relative/path.db, sqlite:////absolute/path.db or"
                " postgresql://user:password@host:port/database, or be empty"
            )
        if value == "sqlite:///":
            raise ValueError("names no file")
        if is_postgres_url(value):
            try:
                check_database_url(value)
            except DatabaseUrlError as error:
                raise ValueError(str(error).removeprefix("DATABASE_URL ")) from None
        return value

    @field_validator("discord_api_base_url", "discord_gateway_url")
    @classmethod
    def _token_stays_private(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None or not value.strip():
            return None
        value = value.strip()
        secure, plain = _SECURE_SCHEMES[str(info.field_name)]
        parts = urlsplit(value)
        host = parts.hostname
        if host and (parts.scheme == secure or (parts.scheme == plain and _is_loopback(host))):
            return value
        raise ValueError(
            f"must be a {secure}:// URL ({plain}:// only to a loopback address such as 127.0.0.1, localhost or"
            " [::1]), because the bot token is sent there"
        )

    @field_validator("logfire_token", "tavily_api_key", "mcp_servers", mode="before")
    @classmethod
    def _blank_token_is_none(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("web_search")
    @classmethod
    def _tavily_needs_its_key(cls, value: WebSearchMode, info: ValidationInfo) -> WebSearchMode:
        if value == "tavily" and info.data.get("tavily_api_key") is None:
            raise ValueError("tavily needs TAVILY_API_KEY")
        return value

    @field_validator(
        "answer_bot_ids",
        "allowed_servers",
        "allowed_channels",
        "blocked_channels",
        "allowed_roles",
        "blocked_roles",
        "blocked_members",
        mode="before",
    )
    @classmethod
    def _comma_separated_ids(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        return frozenset(discord_id(item) for item in value.replace(",", " ").split())

    @field_validator("links_allowed_domains", "links_blocked_domains", mode="before")
    @classmethod
    def _comma_separated_hosts(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        return frozenset(host_name(item) for item in value.replace(",", " ").split())

    @field_validator("guild_id", "support_staff_role", mode="before")
    @classmethod
    def _one_id(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        return discord_id(value.strip()) if value.strip() else None

    @field_validator("support_handoff_minutes")
    @classmethod
    def _handoff_after_the_wait(cls, value: float, info: ValidationInfo) -> float:
        # A post is looked up in the documents once SUPPORT_WAIT_SECONDS have passed; handed off before, it never is.
        wait = info.data.get("support_wait_seconds")
        if wait is not None and value * 60 < wait:
            raise ValueError(f"must be at least SUPPORT_WAIT_SECONDS ({wait:g} s) in minutes: {wait / 60:g} or more")
        return value

    @field_validator("role_limits", mode="before")
    @classmethod
    def _role_limit_rules(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        rules = parse_role_limits(value)
        for rule in rules:
            discord_id(str(rule.role_id))
        return frozenset(rules)

    @field_validator("wake_words", mode="before")
    @classmethod
    def _comma_separated_words(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        words = frozenset(word.strip() for word in value.split(",") if word.strip())
        short = sorted(word for word in words if len(word) < MIN_NAME_CHARS)
        if short:
            raise ValueError(f"each wake word needs at least {MIN_NAME_CHARS} characters; {short[0]!r} is shorter")
        return words

    @field_validator("embedding_model", "image_model", mode="before")
    @classmethod
    def _provider_model_string(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, str):
            return value
        value = value.strip()
        image = info.field_name == "image_model"
        if value and ":" not in value and not (image and value == NATIVE_IMAGES):
            # pydantic-ai's embedding and image models need the provider prefix; say so before the first call does.
            example = "openai:gpt-image-1, or is native" if image else "openai:text-embedding-3-small"
            raise ValueError(f"{value!r} needs its provider, as in {example}")
        return value or None

    @field_validator("timezone")
    @classmethod
    def _known_time_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"{value!r} is not an IANA time zone name, such as UTC or Europe/Paris") from None
        return value

    @property
    def zone(self) -> ZoneInfo:
        """TIMEZONE as a tzinfo."""
        return ZoneInfo(self.timezone)

    @field_validator("shard_ids", mode="before")
    @classmethod
    def _comma_separated_shards(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        ids = value.replace(",", " ").split()
        bad = [item for item in ids if not (item.isascii() and item.isdigit())]
        if bad:
            raise ValueError(f"must be shard numbers separated by commas, e.g. 0,1; {bad[0]!r} is not one")
        return frozenset(int(item) for item in ids)

    @field_validator("shard_ids")
    @classmethod
    def _shards_within_the_count(cls, value: frozenset[int], info: ValidationInfo) -> frozenset[int]:
        if not value:
            return value
        count = info.data.get("shard_count")
        if count is None:
            raise ValueError("needs SHARD_COUNT, the number of shards across every process")
        beyond = sorted(shard for shard in value if shard >= count)
        if beyond:
            raise ValueError(f"shard {beyond[0]} is not below SHARD_COUNT ({count}); shards are numbered from 0")
        return value

    @field_validator("models", "member_models", mode="before")
    @classmethod
    def _comma_separated_models(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        return frozenset(name.strip() for name in value.split(",") if name.strip())

    @field_validator("profiles_file", mode="before")
    @classmethod
    def _blank_file_is_none(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("answer_output_tokens_limit")
    @classmethod
    def _room_for_one_response(cls, value: int, info: ValidationInfo) -> int:
        # Below max_tokens, a single full-length response would stop its own answer.
        max_answer_tokens = info.data.get("max_answer_tokens")
        if max_answer_tokens is not None and value < max_answer_tokens:
            raise ValueError(f"must be at least MAX_ANSWER_TOKENS ({max_answer_tokens})")
        return value

    @model_validator(mode="after")
    def _judge_defaults_to_responder(self) -> Settings:
        if not self.judge_model:
            self.judge_model = self.llm_model
        if not self.summary_model:
            self.summary_model = self.judge_model
        return self

    @property
    def allowed_models(self) -> tuple[str, ...]:
        """The models a profile may name: MODELS, and the ones the deployer set as defaults."""
        defaults = (self.llm_model, self.judge_model or self.llm_model)
        return tuple(dict.fromkeys((*defaults, *sorted(self.models))))

    @property
    def archive_enabled(self) -> bool:
        return bool(self.database_url)

    @property
    def archive_tools_enabled(self) -> bool:
        return self.archive_enabled and self.history_tools

    @property
    def memory_tools_enabled(self) -> bool:
        # HISTORY_TOOLS=false is how a model without tool calling is run: it withholds every tool.
        return self.archive_tools_enabled and self.memory_tools

    @property
    def server_actions_enabled(self) -> bool:
        # Their audit log is the archive's: without it they would leave no record.
        return self.archive_tools_enabled and self.server_actions


def discord_id(text: str) -> int:
    """`text` as a Discord id (a channel's, a role's, a member's, a bot's, a server's); ValueError naming it and
    saying what an id looks like otherwise."""
    if not (text.isascii() and text.isdigit()) or not SNOWFLAKE_MIN <= int(text) < SNOWFLAKE_LIMIT:
        raise ValueError(f"{text!r} is not a Discord id: {WHAT_AN_ID_IS}; separate several with commas")
    return int(text)


def host_name(text: str) -> str:
    """`text` as a host name of the links' domain lists (lower case, no trailing dot); ValueError naming it if not."""
    host = text.strip().lower().rstrip(".")
    if not host or any(mark in host for mark in ("://", "/", ":", "@", "*")):
        raise ValueError(f"{text!r} is not a host name: write the name alone, like example.com (no scheme, path or *)")
    return host


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def describe_settings_error(error: ValidationError) -> str:
    """One readable line naming each bad variable and what is wrong with it."""
    problems = []
    for item in error.errors():
        variable = _variable(item["loc"])
        if item["type"] == "missing":
            problems.append(f"{variable} is not set")
        elif isinstance(item.get("input"), str) and not item["input"].strip():
            problems.append(_empty(variable))
        else:
            problems.append(f"{variable} is invalid: {item['msg']}")
    return "Configuration error: " + "; ".join(problems)


def settings_error_variables(error: ValidationError) -> list[str]:
    """The variables `describe_settings_error` names, one per problem."""
    return [_variable(item["loc"]) for item in error.errors()]


def _variable(loc: tuple[int | str, ...]) -> str:
    return "_".join(str(part) for part in loc).upper() or "settings"


def _empty(variable: str) -> str:
    """An empty value, in place of what its validator says of it: what to set, or that deleting the line gives the
    default."""
    field = Settings.model_fields.get(variable.lower())
    if field is None or field.is_required():
        return f"{variable} is empty: set it (it has no default)"
    return f"{variable} is empty: set it, or delete the line to use the default ({field.default})"
